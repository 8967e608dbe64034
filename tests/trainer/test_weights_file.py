"""The one reader of weights files: the format by content, every zip record judged before any is
inflated, tensors only, one shape out, and one error whose message is one line naming the file."""

from __future__ import annotations

import os
import pickle
import time
import zipfile

import pytest
import torch

from tests.support.weights_files import padded_bomb, save_safetensors
from trainer import weights_file
from trainer.networks import InputSpec, build_model
from trainer.weights_file import WeightsFileError, read_state_dict, read_weights


def lenet_state() -> dict:
    torch.manual_seed(0)
    return build_model("lenet", InputSpec(1, 8, 8, 3)).state_dict()


def test_it_reads_the_format_by_content_and_unwraps_what_ddp_compile_and_checkpoints_add(tmp_path):
    state = lenet_state()
    save_safetensors(state, tmp_path / "named-like-torch.pth")
    torch.save({f"module._orig_mod.{k}": v for k, v in state.items()}, tmp_path / "named-like.safetensors")
    torch.save({"model": state, "epoch": 3, "optimizer": {}}, tmp_path / "checkpoint.pt")

    for name in ("named-like-torch.pth", "named-like.safetensors"):
        read = read_state_dict(tmp_path / name)
        assert sorted(read) == sorted(state), name
        torch.testing.assert_close(read["features.0.weight"], state["features.0.weight"])
    checkpoint = read_weights(tmp_path / "checkpoint.pt")
    assert sorted(checkpoint.state) == sorted(state) and checkpoint.epoch == 3.0


def test_it_judges_every_record_before_inflating_any(tmp_path):
    bomb = padded_bomb(lenet_state(), tmp_path / "bomb.pt")
    many = tmp_path / "many.pt"  # each record under the per-record floor; together 10x over the file
    torch.save(lenet_state(), many)
    with zipfile.ZipFile(many, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        for index in range(24):
            archive.writestr(f"archive/data/small{index}", bytes(1_000_000))

    started = time.monotonic()
    with pytest.raises(WeightsFileError) as bombed:
        read_state_dict(bomb, name="upload.pt")
    with pytest.raises(WeightsFileError) as multiplied:
        read_state_dict(many)
    assert time.monotonic() - started < 5
    assert str(bombed.value).startswith(
        "upload.pt: record 'archive/data/bomb' inflates 1"
    ) and "over the ratio of 10" in str(bombed.value)
    assert str(multiplied.value).startswith("many.pt inflates to 24") and "over 10 times its size" in str(
        multiplied.value
    )


@pytest.mark.parametrize("records", [51, 66_000])  # the classic end record's count; zip64's (> 65,535)
def test_it_counts_a_zips_records_before_listing_them(tmp_path, monkeypatch, records):
    many = tmp_path / "many.pt"
    with zipfile.ZipFile(many, "w") as archive:
        for index in range(records):
            archive.writestr(f"archive/data/{index}", b"")
    monkeypatch.setattr(weights_file, "MAX_ZIP_RECORDS", records - 1)

    def lists_them(*args, **kwargs):
        raise AssertionError("the directory was listed before its count was judged")

    monkeypatch.setattr(weights_file.zipfile, "ZipFile", lists_them)
    with pytest.raises(WeightsFileError) as refused:
        read_state_dict(many, name="upload.pt")
    assert str(refused.value) == f"upload.pt lists {records} records, over the limit of {records - 1}"


class RunsCode:
    def __reduce__(self):
        return (os.system, ("touch pwned-by-pickle",))


# torch warns that it met pickle protocol 4 in the pickled-code file, before refusing it.
@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_it_refuses_what_is_not_weights_in_one_line_naming_the_file(tmp_path):
    torch.save(lenet_state(), tmp_path / "whole.pt")
    save_safetensors(lenet_state(), tmp_path / "whole.safetensors")
    files = {
        "text.pt": b"SECRET_KEY=not-weights\n",
        "truncated.pt": (tmp_path / "whole.pt").read_bytes()[:3000],
        "truncated.safetensors": (tmp_path / "whole.safetensors").read_bytes()[:3000],
        "code.pt": pickle.dumps(RunsCode()),
    }
    torch.save([torch.zeros(1)], tmp_path / "list.pt")
    expected = {
        "text.pt": "text.pt is not a PyTorch state_dict file (torch.save or safetensors)",
        "truncated.pt": "truncated.pt is not a complete PyTorch file (truncated or damaged)",
        "truncated.safetensors": "truncated.safetensors is not a complete PyTorch file (truncated or damaged)",
        "code.pt": "code.pt holds pickled code, not only tensors; refused",
        "list.pt": "list.pt does not hold a state_dict (names to tensors)",
        "absent.pt": "absent.pt: no such file",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    for name, message in expected.items():
        with pytest.raises(WeightsFileError) as refused:
            read_state_dict(tmp_path / name)
        text = str(refused.value)
        assert text.startswith(message) and "\n" not in text and str(tmp_path) not in text, text
    assert not os.path.exists("pwned-by-pickle")
