"""What a weights file is, for every door: the store's import and its discovery of cached files,
a user's upload, a run's checkpoint copied out, and the trainer's fine-tuning all read weights
here, so that they take and refuse the same files for the same reasons.

- The format is read from the content, never the name: a zip (torch.save since PyTorch 1.6), a
  safetensors file (timm's, the Hugging Face hub's: no pickle at all) or torch's legacy pickle
  (older published files, such as torchvision's alexnet).
- Tensors only: torch.load with weights_only=True (a pickle with code is refused, never run).
- Bounded before anything is inflated: torch inflates a zip's records in memory, each to the size
  the zip's directory declares. Every record is judged on its own (a limit and a ratio), because a
  total alone is passed by padding the file with a stored record (an 11 MB upload inflated by
  1 GB on load). safetensors and the legacy pickle are not compressed: their tensors are no larger
  than the file (torch checks the size recorded beside each legacy storage's bytes).
- One shape out: a state_dict of names to tensors; one of our checkpoints counts by its model;
  DDP's `module.` and torch.compile's `_orig_mod.` prefixes stripped.

Every refusal is a WeightsFileError whose message is one line naming the file by the name the
caller gives (an upload's own name, never a server path). torch and safetensors are imported
only where a file is read, so the workbench's web process can import the error and the limits.
"""

from __future__ import annotations

import json
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

# The largest weights file, and the most a file's records may inflate to in all.
MAX_WEIGHTS_BYTES = 2 * 1024**3
# How many times its stored bytes one zip record may inflate to. torch.save stores its records
# (1x); float tensors deflated by a zip tool shrink to about 0.9; zeros-heavy (pruned) tensors
# may shrink further, hence 10 rather than 1. A zip bomb's record inflates about 1000x.
MAX_RECORD_RATIO = 10
# Records that inflate to less than this are not judged by ratio (a deflated bias of zeros
# inflates 100x, harmlessly); their sum still counts in the file's total, bounded by the ratio.
SMALL_RECORD_BYTES = 1 << 20
# safetensors' own limit on its JSON header (the Rust reader refuses larger ones).
MAX_SAFETENSORS_HEADER = 100 * 1024**2
# The most records a weights zip may list. zipfile builds an object per record of the directory
# before anything can be judged (a few hundred bytes each, so millions of tiny records cost
# gigabytes); torch.save writes one record per tensor storage and a few more: a large network has
# thousands.
MAX_ZIP_RECORDS = 100_000
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTO = 0x80  # the first byte of a pickle of protocol 2 or later: torch's legacy format
# DDP wraps the model in `module`; torch.compile in `_orig_mod`: the same tensors either way.
_PREFIXES = ("module.", "_orig_mod.")


class WeightsFileError(ValueError):
    """A file that is not weights, or not within the limits; the message is the one line to show."""


def file_format(path: Path, *, name: str) -> str:
    """ "zip", "safetensors" or "pickle", read from the file's first bytes."""
    try:
        with path.open("rb") as handle:
            head = handle.read(9)
    except OSError:
        raise WeightsFileError(f"{name}: no such file") from None
    if head.startswith(_ZIP_MAGIC):
        return "zip"
    if len(head) == 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") <= MAX_SAFETENSORS_HEADER:
        return "safetensors"
    if head[:1] == bytes([_PICKLE_PROTO]):
        return "pickle"
    raise WeightsFileError(f"{name} is not a PyTorch state_dict file (torch.save or safetensors)")


def check_records(path: Path, *, name: str, max_bytes: int | None = MAX_WEIGHTS_BYTES) -> None:
    """Refuses a zip whose records would inflate beyond the limits, from its directory alone
    (nothing is inflated). torch allocates each record at the size the directory declares and
    reads no further, so the declared sizes bound the memory a load takes."""
    listed = _listed_records(path)
    if listed is not None and listed > MAX_ZIP_RECORDS:
        raise WeightsFileError(f"{name} lists {listed} records, over the limit of {MAX_ZIP_RECORDS}")
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise WeightsFileError(f"{name} is not a complete PyTorch file (truncated or damaged)") from None
    for record in records:
        ratio = record.file_size / max(1, record.compress_size)
        if max_bytes is not None and record.file_size > max_bytes:
            raise WeightsFileError(
                f"{name}: record {record.filename[:60]!r} inflates to {record.file_size} bytes, "
                f"over the {max_bytes} byte limit"
            )
        if record.file_size >= SMALL_RECORD_BYTES and ratio > MAX_RECORD_RATIO:
            raise WeightsFileError(
                f"{name}: record {record.filename[:60]!r} inflates {ratio:.0f} times its stored size "
                f"(to {record.file_size} bytes), over the ratio of {MAX_RECORD_RATIO} (torch.save stores its records)"
            )
    inflated = sum(record.file_size for record in records)
    if max_bytes is not None and inflated > max_bytes:
        raise WeightsFileError(f"{name} inflates to {inflated} bytes, over the {max_bytes} byte limit")
    if inflated > MAX_RECORD_RATIO * max(SMALL_RECORD_BYTES, path.stat().st_size):
        raise WeightsFileError(
            f"{name} inflates to {inflated} bytes, over {MAX_RECORD_RATIO} times its size "
            "(torch.save stores its records)"
        )


def _listed_records(path: Path) -> int | None:
    """How many records the zip's end record says its directory lists (the zip64 end record's
    count when the classic one's field is full), read before zipfile reads the directory; None
    when there is no end record (zipfile then refuses the file itself)."""
    with path.open("rb") as handle:
        size = handle.seek(0, 2)
        tail_start = max(0, size - (22 + 0xFFFF))  # the end record, after a comment of at most 64 KiB
        handle.seek(tail_start)
        tail = handle.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) < at + 22:
            return None
        (count,) = struct.unpack_from("<H", tail, at + 10)
        locator = at - 20
        if count != 0xFFFF or locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
            return count
        (zip64_end,) = struct.unpack_from("<Q", tail, locator + 8)
        handle.seek(min(zip64_end, size))
        record = handle.read(56)
    if len(record) < 56 or record[:4] != b"PK\x06\x06":
        return None
    return struct.unpack_from("<Q", record, 32)[0]


def _load(path: Path, kind: str, *, name: str) -> object:
    # torch and safetensors here only: the workbench imports this module for its error and limits.
    import pickle  # the error weights_only raises: imported with torch, only where a file is read

    import torch  # torch: loaded only where a file is read
    from safetensors import SafetensorError  # safetensors: loaded only where a file is read
    from safetensors.torch import load_file  # safetensors: loaded only where a file is read

    try:
        if kind == "safetensors":
            return load_file(str(path), device="cpu")
        # An open file, not its path: this torch reads a path ending .safetensors as safetensors.
        with path.open("rb") as handle:
            return torch.load(handle, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        # torch's words for a global weights_only refuses; any other unpickling error is damage.
        if "Weights only load failed" in str(error):
            raise WeightsFileError(
                f"{name} holds pickled code, not only tensors; refused (torch.load with weights_only=True)"
            ) from None
        raise WeightsFileError(f"{name} is not a complete PyTorch file (truncated or damaged)") from None
    except (SafetensorError, RuntimeError, EOFError, OSError, ValueError, KeyError, json.JSONDecodeError):
        # The details could quote the file; its name and what is wrong is enough.
        raise WeightsFileError(f"{name} is not a complete PyTorch file (truncated or damaged)") from None


@dataclass(frozen=True)
class Weights:
    state: dict  # names to tensors, prefixes stripped
    epoch: float | None  # the epoch of one of our checkpoints; None for plain weights


def read_weights(path: str | Path, *, name: str | None = None, max_bytes: int | None = MAX_WEIGHTS_BYTES) -> Weights:
    """The file's state_dict (and its epoch when it is one of our checkpoints), or WeightsFileError.
    `name`: how messages name the file (its file name when not given). `max_bytes`: None for a
    checkpoint our own trainer wrote (its optimizer state may pass the limit weights are held to)."""
    path = Path(path)
    name = name or path.name
    if max_bytes is not None and path.is_file() and path.stat().st_size > max_bytes:
        raise WeightsFileError(f"{name} is {path.stat().st_size} bytes, over the {max_bytes} byte limit")
    kind = file_format(path, name=name)
    if kind == "zip":
        check_records(path, name=name, max_bytes=max_bytes)
    state = _load(path, kind, name=name)
    epoch = None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        epoch = state.get("epoch") if isinstance(state.get("epoch"), int | float) else None
        state = state["model"]  # one of our checkpoints
    return Weights(_unwrapped(state, name=name), None if epoch is None else float(epoch))


def read_state_dict(path: str | Path, *, name: str | None = None, max_bytes: int | None = MAX_WEIGHTS_BYTES) -> dict:
    """read_weights' state_dict: what fine-tuning and the store's checks need."""
    return read_weights(path, name=name, max_bytes=max_bytes).state


def _unwrapped(state: object, *, name: str) -> dict:
    import torch  # torch: loaded only where a file is read (already, by _load)

    if (
        not isinstance(state, dict)
        or not state
        or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())
    ):
        raise WeightsFileError(f"{name} does not hold a state_dict (names to tensors)")
    unwrapped = {}
    for key, tensor in state.items():
        for prefix in _PREFIXES:
            key = key.removeprefix(prefix)
        unwrapped[key] = tensor
    return unwrapped


def suffix_of(path: Path) -> str:
    """The file name ending a stored copy of `path` should carry (for people and other tools:
    this module reads the content, not the name)."""
    return ".safetensors" if file_format(path, name=path.name) == "safetensors" else ".pth"


def main(argv: list[str]) -> int:
    """`python -m trainer.weights_file PATH NAME`: read the file as a state_dict and print one
    line, its tensor count (exit 0) or its refusal (exit 2). The web process checks an upload
    this way, so the file's tensors (up to MAX_WEIGHTS_BYTES) are loaded by a child that then
    ends, never into the process that serves every user (workbench/weights/uploads.py)."""
    path, name = argv
    try:
        state = read_state_dict(path, name=name)
    except WeightsFileError as error:
        print(str(error), flush=True)
        return 2
    print(f"{len(state)} tensors", flush=True)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
