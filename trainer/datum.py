"""The Caffe / DIGITS LMDB format: `Datum` records and `BlobProto` mean files.

This module is the contract between the datasets app (which writes LMDBs) and the trainer (which
reads them). The protobuf message classes are built at run time from a tiny proto2 descriptor, so
there is no generated `_pb2` file to keep in sync and no hand-written varint parsing: the
`protobuf` package does the wire format, including packed/unpacked repeated floats.

Orientation conventions (all public functions):
- pixels handed in are H x W x C (or H x W) uint8, RGB;
- arrays handed out are C x H x W, RGB (C=1 for gray);
- on disk, raw data and mean files are planar BGR, as Caffe expects.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import lmdb
import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from PIL import Image

__all__ = [
    "BlobProto",
    "Datum",
    "DatumError",
    "DatumLMDB",
    "decode_datum",
    "encode_datum",
    "read_mean_blobproto",
    "write_datum_lmdb",
    "write_mean_blobproto",
]

ENCODINGS = ("none", "png", "jpg")
JPEG_QUALITY = 90  # DIGITS' choice: visually lossless for training, ~5x smaller than PNG


class DatumError(ValueError):
    """A record or mean file that is not what the Caffe format says it should be."""


# --------------------------------------------------------------------------------------------
# Message classes, built from a descriptor (proto2, same field numbers as caffe.proto)
# --------------------------------------------------------------------------------------------


def _build_message_classes() -> tuple[type, type]:
    fdp = descriptor_pb2.FileDescriptorProto(
        name="workbench/caffe_datum.proto", package="workbench_caffe", syntax="proto2"
    )
    f = descriptor_pb2.FieldDescriptorProto

    def field(
        msg: Any,
        name: str,
        number: int,
        type_: int,
        *,
        repeated: bool = False,
        packed: bool = False,
        default: str | None = None,
        type_name: str | None = None,
    ) -> None:
        fd = msg.field.add(
            name=name, number=number, type=type_, label=f.LABEL_REPEATED if repeated else f.LABEL_OPTIONAL
        )
        if default is not None:
            fd.default_value = default
        if type_name is not None:
            fd.type_name = type_name
        if packed:
            fd.options.packed = True

    datum = fdp.message_type.add(name="Datum")
    field(datum, "channels", 1, f.TYPE_INT32)
    field(datum, "height", 2, f.TYPE_INT32)
    field(datum, "width", 3, f.TYPE_INT32)
    field(datum, "data", 4, f.TYPE_BYTES)
    field(datum, "label", 5, f.TYPE_INT32)
    field(datum, "float_data", 6, f.TYPE_FLOAT, repeated=True)
    field(datum, "encoded", 7, f.TYPE_BOOL, default="false")

    shape = fdp.message_type.add(name="BlobShape")
    field(shape, "dim", 1, f.TYPE_INT64, repeated=True, packed=True)

    blob = fdp.message_type.add(name="BlobProto")
    field(blob, "num", 1, f.TYPE_INT32, default="0")
    field(blob, "channels", 2, f.TYPE_INT32, default="0")
    field(blob, "height", 3, f.TYPE_INT32, default="0")
    field(blob, "width", 4, f.TYPE_INT32, default="0")
    # packed=True is how Caffe declares it; proto2 parsers accept the unpacked encoding too.
    field(blob, "data", 5, f.TYPE_FLOAT, repeated=True, packed=True)
    field(blob, "diff", 6, f.TYPE_FLOAT, repeated=True, packed=True)
    field(blob, "shape", 7, f.TYPE_MESSAGE, type_name=".workbench_caffe.BlobShape")
    field(blob, "double_data", 8, f.TYPE_DOUBLE, repeated=True, packed=True)

    # A private pool, so importing a real caffe_pb2 elsewhere in the process cannot clash.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("workbench_caffe.Datum")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("workbench_caffe.BlobProto")),
    )


Datum, BlobProto = _build_message_classes()


# --------------------------------------------------------------------------------------------
# Datum
# --------------------------------------------------------------------------------------------


def _as_hwc(pixels: np.ndarray) -> np.ndarray:
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8:
        raise DatumError(f"pixels must be a uint8 numpy array, got {getattr(pixels, 'dtype', type(pixels))}")
    if pixels.ndim == 2:
        return pixels[:, :, None]
    if pixels.ndim == 3 and pixels.shape[2] in (1, 3):
        return pixels
    raise DatumError(f"pixels must be H x W or H x W x C with C in (1, 3), got shape {pixels.shape}")


def encode_datum(pixels: np.ndarray, label: int, *, encoding: str = "none") -> bytes:
    """Serialise one image (H x W x C RGB or H x W gray, uint8) as a Caffe `Datum`."""
    hwc = _as_hwc(pixels)
    h, w, c = hwc.shape
    datum = Datum(channels=c, height=h, width=w, label=int(label))
    if encoding == "none":
        chw = hwc.transpose(2, 0, 1)
        if c == 3:
            chw = chw[::-1]  # RGB -> BGR, Caffe's channel order
        datum.data = np.ascontiguousarray(chw).tobytes()
    elif encoding in ("png", "jpg"):
        image = Image.fromarray(hwc[:, :, 0] if c == 1 else hwc, mode="L" if c == 1 else "RGB")
        buf = io.BytesIO()
        if encoding == "png":
            image.save(buf, format="PNG")
        else:
            image.save(buf, format="JPEG", quality=JPEG_QUALITY)
        datum.data = buf.getvalue()
        datum.encoded = True
    else:
        raise DatumError(f"encoding: {encoding!r} is not one of {', '.join(ENCODINGS)}")
    return datum.SerializeToString()


def _key_name(key: bytes | str | None) -> str:
    if key is None:
        return "record"
    if isinstance(key, bytes):
        key = key.decode("ascii", errors="backslashreplace")
    return f"record {key}"


def _image_to_chw(image: Image.Image, channels: int) -> np.ndarray:
    gray_modes = ("1", "L", "LA", "I", "I;16", "I;16B", "I;16L", "F")
    want_gray = channels == 1 or (channels not in (1, 3) and image.mode in gray_modes)
    mode = "L" if want_gray else "RGB"
    if image.mode != mode:
        has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
        if has_alpha:
            # Flatten transparency onto black rather than letting convert() drop alpha arbitrarily.
            image = image.convert("RGBA")
            background = Image.new("RGBA", image.size, (0, 0, 0, 255))
            image = Image.alpha_composite(background, image)
        image = image.convert(mode)
    # A copy either way: np.asarray(image) is a read-only view of Pillow's buffer, and torch warns
    # for every read-only array it is handed ("not writable"): one line per grey run in its log.
    arr = np.asarray(image, dtype=np.uint8)
    return arr[None].copy() if arr.ndim == 2 else np.ascontiguousarray(arr.transpose(2, 0, 1))


def _decode_encoded(
    data: bytes, channels: int, where: str, check_size: Callable[[int, int], None] | None
) -> np.ndarray:
    # Image.open keeps Pillow's decompression-bomb limit (MAX_IMAGE_PIXELS) in force.
    try:
        image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        raise DatumError(f"{where}: image refused by Pillow's size limit ({exc})") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DatumError(f"{where}: encoded image cannot be decoded ({exc})") from None
    with image:
        if check_size is not None:
            check_size(*image.size)  # from the header, before load(); its refusal is raised as it is
        try:
            image.load()
            return _image_to_chw(image, channels)
        except (OSError, SyntaxError, ValueError) as exc:
            raise DatumError(f"{where}: encoded image cannot be decoded ({exc})") from None


def decode_datum(
    value: bytes, *, key: bytes | str | None = None, check_size: Callable[[int, int], None] | None = None
) -> tuple[np.ndarray, int]:
    """Parse a `Datum` value into (uint8 C x H x W RGB array, label). Raises DatumError.

    `check_size(width, height)` (an imported LMDB's records are user images: the importer passes
    its one size rule, which raises to refuse) is called before any pixel is decoded or copied."""
    where = _key_name(key)
    datum = Datum()
    try:
        datum.ParseFromString(bytes(value))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise DatumError(f"{where}: not a Caffe Datum ({exc})") from None
    c, h, w = datum.channels, datum.height, datum.width

    if datum.encoded:
        if not datum.data:
            raise DatumError(f"{where}: encoded datum has no image data")
        chw = _decode_encoded(datum.data, c, where, check_size)
        if (h and h != chw.shape[1]) or (w and w != chw.shape[2]):
            raise DatumError(f"{where}: header says {h}x{w} but the encoded image is {chw.shape[1]}x{chw.shape[2]}")
        return chw, int(datum.label)

    if c not in (1, 3):
        if c == 0 and h == 0 and w == 0 and not datum.data and not datum.float_data:
            raise DatumError(f"{where}: not a Caffe Datum (no dimensions and no data)")
        raise DatumError(f"{where}: channels is {c}, expected 1 or 3")
    if h <= 0 or w <= 0:
        raise DatumError(f"{where}: height/width are {h}x{w}, expected positive sizes")
    if check_size is not None:
        check_size(w, h)
    expected = c * h * w
    if datum.data:
        if len(datum.data) != expected:
            raise DatumError(f"{where}: data length {len(datum.data)} does not match {c}x{h}x{w}={expected}")
        chw = np.frombuffer(datum.data, dtype=np.uint8).reshape(c, h, w)
    elif len(datum.float_data):
        if len(datum.float_data) != expected:
            raise DatumError(
                f"{where}: float_data length {len(datum.float_data)} does not match {c}x{h}x{w}={expected}"
            )
        floats = np.asarray(datum.float_data, dtype=np.float32)
        if not np.isfinite(floats).all():
            raise DatumError(f"{where}: float_data contains NaN or infinity")
        # Float datums carry 0..255 pixel values by convention; round and clip into uint8.
        chw = np.clip(np.rint(floats), 0, 255).astype(np.uint8).reshape(c, h, w)
    else:
        raise DatumError(f"{where}: datum has neither data nor float_data")
    # BGR on disk -> RGB in memory; both branches copy, so the array is writable and owns its data.
    chw = np.ascontiguousarray(chw[::-1]) if c == 3 else chw.copy()
    return chw, int(datum.label)


# --------------------------------------------------------------------------------------------
# BlobProto mean files
# --------------------------------------------------------------------------------------------


def read_mean_blobproto(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a Caffe `mean.binaryproto` into a float32 C x H x W RGB array (values 0..255)."""
    with open(path, "rb") as fh:
        raw = fh.read()
    blob = BlobProto()
    try:
        blob.ParseFromString(raw)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise DatumError(f"{path}: not a Caffe BlobProto ({exc})") from None
    if blob.HasField("shape") and len(blob.shape.dim):
        dims = [int(d) for d in blob.shape.dim]
        if len(dims) == 4 and dims[0] == 1:
            dims = dims[1:]
        if len(dims) == 2:
            dims = [1, *dims]
        if len(dims) != 3:
            raise DatumError(f"{path}: blob shape {dims} is not (1,) C x H x W")
        c, h, w = dims
    else:
        c, h, w = blob.channels, blob.height, blob.width
        if blob.num not in (0, 1):
            raise DatumError(f"{path}: blob holds {blob.num} images, expected 1")
    values = np.asarray(blob.data if len(blob.data) else blob.double_data, dtype=np.float32)
    if c <= 0 or h <= 0 or w <= 0:
        raise DatumError(f"{path}: blob dimensions {c}x{h}x{w} are not positive")
    if values.size != c * h * w:
        raise DatumError(f"{path}: blob has {values.size} values, expected {c}x{h}x{w}={c * h * w}")
    mean = values.reshape(c, h, w)
    if c == 3:
        mean = mean[::-1]
    return np.ascontiguousarray(mean, dtype=np.float32)


def write_mean_blobproto(path: str | os.PathLike[str], mean_chw_rgb: np.ndarray) -> None:
    """Write a C x H x W RGB mean image as a Caffe BlobProto (num=1, BGR, packed floats)."""
    mean = np.asarray(mean_chw_rgb, dtype=np.float32)
    if mean.ndim != 3 or mean.shape[0] not in (1, 3):
        raise DatumError(f"mean must be C x H x W with C in (1, 3), got shape {mean.shape}")
    c, h, w = mean.shape
    blob = BlobProto(num=1, channels=c, height=h, width=w)
    blob.data.extend((mean[::-1] if c == 3 else mean).ravel().tolist())
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(blob.SerializeToString())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# LMDB access
# --------------------------------------------------------------------------------------------

# One environment per (process, LMDB path): py-lmdb refuses to open the same path twice in a
# process, and a handle inherited through fork() must never be used. Reference-counted so that
# DatumLMDB.close() only closes it when no other reader in this process still uses it.
_ENVS: dict[tuple[int, str], list] = {}


def _drop_inherited_envs() -> None:
    # py-lmdb remembers open files per process, and that memory survives fork(): a forked
    # DataLoader worker must close what it inherited (closing only unmaps this process's view;
    # with lock=False there is no shared lock state) before it can open its own handle.
    pid = os.getpid()
    for key in [k for k in _ENVS if k[0] != pid]:
        env = _ENVS.pop(key)[0]
        try:
            env.close()
        except lmdb.Error:
            pass


def _acquire_env(path: str) -> lmdb.Environment:
    _drop_inherited_envs()
    key = (os.getpid(), os.path.realpath(path))
    entry = _ENVS.get(key)
    if entry is None:
        if not os.path.exists(path):
            raise DatumError(f"{path}: LMDB not found")
        # readonly + lock=False: many reader processes, no lock file writes (works on read-only
        # mounts); readahead=False: random access over a large file, the OS readahead only evicts
        # useful pages; meminit=False: no zeroing of buffers we never write.
        env = lmdb.open(
            path,
            readonly=True,
            lock=False,
            readahead=False,
            meminit=False,
            subdir=os.path.isdir(path),
            max_readers=512,
        )
        entry = _ENVS[key] = [env, 0]
    entry[1] += 1
    return entry[0]


def _release_env(path: str) -> None:
    key = (os.getpid(), os.path.realpath(path))
    entry = _ENVS.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _ENVS[key]
        entry[0].close()


class DatumLMDB:
    """Random access to a Caffe Datum LMDB, safe to hand to DataLoader worker processes.

    The environment is opened lazily and re-opened in every process that touches it (an LMDB
    handle must not cross fork()), and it is dropped when the object is pickled.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._env: lmdb.Environment | None = None
        self._pid: int | None = None
        self._keys: list[bytes] | None = None

    def _environment(self) -> lmdb.Environment:
        if self._env is None or self._pid != os.getpid():
            self._env = _acquire_env(self.path)
            self._pid = os.getpid()
        return self._env

    def keys(self) -> list[bytes]:
        if self._keys is None:
            with self._environment().begin() as txn:
                # Keys only: values are never copied out, so this is cheap even for big LMDBs.
                self._keys = list(txn.cursor().iternext(keys=True, values=False))
        return self._keys

    def __len__(self) -> int:
        return len(self.keys())

    def raw(self, index: int) -> bytes:
        key = self.keys()[index]
        with self._environment().begin() as txn:
            value = txn.get(key)
        if value is None:
            raise DatumError(f"{self.path}: {_key_name(key)} vanished from the database")
        return value

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        key = self.keys()[index]
        return decode_datum(self.raw(index), key=key)

    def __iter__(self) -> Iterator[tuple[np.ndarray, int]]:
        for i in range(len(self)):
            yield self[i]

    def first(self) -> tuple[bytes, bytes] | None:
        """The first (key, value) pair, without collecting all keys."""
        with self._environment().begin() as txn:
            cursor = txn.cursor()
            return (bytes(cursor.key()), bytes(cursor.value())) if cursor.first() else None

    def entries(self) -> int:
        return int(self._environment().stat()["entries"])

    def close(self) -> None:
        if self._env is not None and self._pid == os.getpid():
            _release_env(self.path)
        self._env = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_env"] = None
        state["_pid"] = None
        return state

    def __repr__(self) -> str:
        return f"DatumLMDB({self.path!r})"


def write_datum_lmdb(
    path: str | os.PathLike[str],
    records: Iterable[tuple[bytes, bytes]],
    *,
    map_size: int = 1 << 30,
    commit_every: int = 1000,
) -> int:
    """Write (key, serialized Datum) pairs into a fresh LMDB folder; returns the count.

    A convenience for tests and small tools; the datasets app has its own parallel builder.
    The map grows by doubling when full, so callers need not guess the final size.
    """
    env = lmdb.open(os.fspath(path), map_size=map_size, subdir=True, lock=True)
    count = 0
    pending: list[tuple[bytes, bytes]] = []

    def flush() -> None:
        nonlocal map_size
        while True:
            try:
                with env.begin(write=True) as txn:
                    for k, v in pending:
                        txn.put(k, v)
                break
            except lmdb.MapFullError:
                map_size *= 2
                env.set_mapsize(map_size)
        pending.clear()

    try:
        for key, value in records:
            pending.append((key, value))
            count += 1
            if len(pending) >= commit_every:
                flush()
        flush()
    finally:
        env.close()
    return count
