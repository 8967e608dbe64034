"""The Caffe Datum / BlobProto contract shared with the datasets app."""

from __future__ import annotations

import io
import pickle
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from tests.support.trainer_data import make_dataset_folder
from trainer.dataset_folder import DatasetFolderError, load_dataset_folder
from trainer.datum import (
    BlobProto,
    Datum,
    DatumError,
    DatumLMDB,
    decode_datum,
    encode_datum,
    read_mean_blobproto,
    write_datum_lmdb,
    write_mean_blobproto,
)


def _rgb(h: int = 5, w: int = 7, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_it_round_trips_raw_rgb_and_stores_planar_bgr():
    pixels = _rgb()
    value = encode_datum(pixels, 4)
    datum = Datum()
    datum.ParseFromString(value)
    assert (datum.channels, datum.height, datum.width, datum.label, datum.encoded) == (3, 5, 7, 4, False)
    # Hand-made planar BGR buffer: all B, then all G, then all R.
    expected = pixels[:, :, 2].tobytes() + pixels[:, :, 1].tobytes() + pixels[:, :, 0].tobytes()
    assert datum.data == expected
    chw, label = decode_datum(value)
    assert label == 4
    assert chw.dtype == np.uint8 and chw.shape == (3, 5, 7)
    np.testing.assert_array_equal(chw.transpose(1, 2, 0), pixels)


def test_it_decodes_a_hand_made_bgr_datum_as_rgb():
    blue, green, red = bytes([10] * 4), bytes([20] * 4), bytes([30] * 4)
    value = Datum(channels=3, height=2, width=2, data=blue + green + red, label=1).SerializeToString()
    chw, label = decode_datum(value)
    assert label == 1
    assert chw[:, 0, 0].tolist() == [30, 20, 10]  # R, G, B


@pytest.mark.parametrize("shape", [(6, 4), (6, 4, 1)])
def test_it_round_trips_gray(shape):
    pixels = np.arange(24, dtype=np.uint8).reshape(shape) * 10
    chw, label = decode_datum(encode_datum(pixels, 0))
    assert chw.shape == (1, 6, 4) and label == 0
    np.testing.assert_array_equal(chw[0], pixels.reshape(6, 4))


@pytest.mark.parametrize("gray", [False, True])
def test_it_round_trips_png_exactly(gray):
    pixels = _rgb()[:, :, 0] if gray else _rgb()
    value = encode_datum(pixels, 2, encoding="png")
    datum = Datum()
    datum.ParseFromString(value)
    assert datum.encoded and datum.data[:4] == b"\x89PNG"
    assert (datum.channels, datum.height, datum.width) == (1 if gray else 3, 5, 7)
    chw, label = decode_datum(value)
    assert label == 2
    np.testing.assert_array_equal(chw.transpose(1, 2, 0).squeeze(), pixels)


def test_it_round_trips_jpg_approximately():
    pixels = np.full((16, 16, 3), (200, 50, 20), dtype=np.uint8)
    value = encode_datum(pixels, 1, encoding="jpg")
    datum = Datum()
    datum.ParseFromString(value)
    assert datum.data[:2] == b"\xff\xd8"
    chw, _ = decode_datum(value)
    assert np.abs(chw.transpose(1, 2, 0).astype(int) - pixels).max() <= 6


def _png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_it_reads_dimensions_from_encoded_images_when_missing():
    pixels = _rgb(3, 9)
    value = Datum(data=_png_bytes(Image.fromarray(pixels)), encoded=True, label=7).SerializeToString()
    chw, label = decode_datum(value)
    assert chw.shape == (3, 3, 9) and label == 7
    np.testing.assert_array_equal(chw.transpose(1, 2, 0), pixels)


def test_it_converts_other_image_modes():
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 255))
    chw, _ = decode_datum(Datum(data=_png_bytes(rgba), encoded=True).SerializeToString())
    assert chw.shape == (3, 4, 4) and chw[:, 0, 0].tolist() == [255, 0, 0]
    palette = Image.new("P", (4, 4), 0)
    chw, _ = decode_datum(Datum(data=_png_bytes(palette), encoded=True, channels=1).SerializeToString())
    assert chw.shape == (1, 4, 4)


def test_it_converts_float_data_datums():
    floats = [0.0, 100.4, 254.6, 300.0, -5.0, 17.0]
    value = Datum(channels=1, height=2, width=3, float_data=floats, label=3).SerializeToString()
    chw, label = decode_datum(value)
    assert chw.reshape(-1).tolist() == [0, 100, 255, 255, 0, 17] and label == 3


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            Datum(channels=3, height=8, width=8, data=b"x" * 100).SerializeToString(),
            "record 00000012_3: data length 100 does not match 3x8x8=192",
        ),
        (b"\xff\xff\xff\xff", "record 00000012_3: not a Caffe Datum"),
        (b"", "not a Caffe Datum"),
        (Datum(data=b"not an image", encoded=True).SerializeToString(), "cannot be decoded"),
        (Datum(channels=1, height=2, width=2, float_data=[1.0, float("nan"), 1, 1]).SerializeToString(), "NaN"),
        (Datum(channels=1, height=2, width=2).SerializeToString(), "neither data nor float_data"),
        (Datum(channels=4, height=2, width=2, data=b"x" * 16).SerializeToString(), "channels is 4"),
    ],
)
def test_it_rejects_corrupt_values_with_a_clear_message(value, message):
    with pytest.raises(DatumError, match=message.replace("(", r"\(")):
        decode_datum(value, key=b"00000012_3")


def test_it_rejects_dimension_mismatch_for_encoded_images():
    value = Datum(
        channels=3, height=99, width=9, data=_png_bytes(Image.fromarray(_rgb(3, 9))), encoded=True
    ).SerializeToString()
    with pytest.raises(DatumError, match="header says 99x9"):
        decode_datum(value)


def test_it_round_trips_mean_blobproto_in_bgr(tmp_path):
    mean = np.random.default_rng(1).uniform(0, 255, size=(3, 4, 5)).astype(np.float32)
    write_mean_blobproto(tmp_path / "mean.binaryproto", mean)
    blob = BlobProto()
    blob.ParseFromString((tmp_path / "mean.binaryproto").read_bytes())
    assert (blob.num, blob.channels, blob.height, blob.width) == (1, 3, 4, 5)
    np.testing.assert_allclose(np.asarray(blob.data).reshape(3, 4, 5), mean[::-1])
    np.testing.assert_allclose(read_mean_blobproto(tmp_path / "mean.binaryproto"), mean)


def test_it_reads_unpacked_blobproto_and_shape_only_blobs(tmp_path):
    values = [float(i) for i in range(12)]
    # Hand-built wire bytes: fields 1-4 as varints, field 5 as twelve unpacked fixed32 floats.
    wire = bytes([0x08, 1, 0x10, 3, 0x18, 2, 0x20, 2])
    wire += b"".join(bytes([0x2D]) + struct.pack("<f", v) for v in values)
    (tmp_path / "unpacked.binaryproto").write_bytes(wire)
    mean = read_mean_blobproto(tmp_path / "unpacked.binaryproto")
    np.testing.assert_array_equal(mean, np.asarray(values, np.float32).reshape(3, 2, 2)[::-1])

    blob = BlobProto(data=values)
    blob.shape.dim.extend([1, 1, 3, 4])
    (tmp_path / "shaped.binaryproto").write_bytes(blob.SerializeToString())
    assert read_mean_blobproto(tmp_path / "shaped.binaryproto").shape == (1, 3, 4)

    (tmp_path / "bad.binaryproto").write_bytes(
        BlobProto(num=1, channels=3, height=2, width=2, data=[1.0]).SerializeToString()
    )
    with pytest.raises(DatumError, match="1 values, expected 3x2x2=12"):
        read_mean_blobproto(tmp_path / "bad.binaryproto")


def _write_lmdb(path, n=10):
    records = [(b"%08d_%d" % (i, i % 3), encode_datum(np.full((4, 4, 3), i, np.uint8), i % 3)) for i in range(n)]
    write_datum_lmdb(path, records, map_size=1 << 20)
    return records


def test_it_reads_an_lmdb_lazily_and_survives_pickling(tmp_path):
    _write_lmdb(tmp_path / "db", n=10)
    db = DatumLMDB(tmp_path / "db")
    assert db._env is None  # nothing opened by construction
    assert len(db) == 10 and db.keys()[3] == b"00000003_0"
    clone = pickle.loads(pickle.dumps(db))
    assert clone._env is None
    image, label = clone[5]
    assert label == 2 and image.shape == (3, 4, 4) and int(image[0, 0, 0]) == 5


class _TorchView(torch.utils.data.Dataset):
    def __init__(self, db):
        self.db = db

    def __len__(self):
        return len(self.db)

    def __getitem__(self, i):
        image, label = self.db[i]
        return torch.from_numpy(image), label


def test_it_feeds_a_dataloader_with_two_workers(tmp_path):
    _write_lmdb(tmp_path / "db", n=12)
    db = DatumLMDB(tmp_path / "db")
    len(db)  # open in the parent first: the workers must re-open their own environment
    loader = torch.utils.data.DataLoader(_TorchView(db), batch_size=4, num_workers=2)
    seen = sorted(int(x[0, 0, 0]) for images, _ in loader for x in images)
    assert seen == list(range(12))


def test_it_loads_a_dataset_folder_and_a_bare_digits_folder(tmp_path):
    info = load_dataset_folder(
        make_dataset_folder(tmp_path / "ds", channels=3, size=(6, 10), num_classes=3, train=9, val=6)
    )
    assert (info.image_width, info.image_height, info.channels) == (10, 6, 3)
    assert info.splits["train"].count == 9 and sum(info.splits["val"].class_counts) == 6
    assert info.mean_image().shape == (3, 6, 10)

    digits = load_dataset_folder(
        make_dataset_folder(tmp_path / "digits_job", encoding="png", channels=3, train=6, val=3, digits_layout=True)
    )
    assert digits.from_digits and digits.encoding == "png"
    assert (digits.channels, digits.image_height, digits.labels) == (3, 8, ["class_0", "class_1", "class_2"])
    assert digits.splits["val"].count == 3
    assert digits.mean_image().shape == (3, 8, 8)  # from mean.binaryproto, BGR -> RGB

    with pytest.raises(DatasetFolderError, match="neither dataset.json nor labels.txt"):
        load_dataset_folder(tmp_path)


def test_it_keeps_pillows_decompression_bomb_limit(monkeypatch):
    value = encode_datum(np.zeros((20, 20), np.uint8), 0, encoding="png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 400 pixels > 2 x limit: refused, not decoded
    with pytest.raises(DatumError, match="record 7_0: image refused by Pillow's size limit"):
        decode_datum(value, key="7_0")


@pytest.mark.parametrize("encoding", ["none", "png", "jpg"])
@pytest.mark.parametrize("shape", [(6, 5), (6, 5, 3)], ids=["grey", "rgb"])
def test_it_decodes_writable_pixels_so_torch_warns_in_no_run_log(encoding, shape):
    # A read-only array (a grey image was a view of Pillow's buffer) made torch.from_numpy warn
    # "The given NumPy array is not writable" in every trainer log.
    pixels = np.random.default_rng(0).integers(0, 255, shape, dtype=np.uint8)
    chw, _label = decode_datum(encode_datum(pixels, 1, encoding=encoding))
    assert chw.flags.writeable and chw.flags.c_contiguous
