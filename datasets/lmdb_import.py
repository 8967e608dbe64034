"""Import existing Caffe Datum LMDBs (one per split, or a DIGITS dataset job folder).

Every record is validated in a separate process (a damaged LMDB or a hostile record can at worst
kill that process, never the Celery worker): it must parse as a Datum, decode, have the shape of
the first good record, and carry a label inside the labels file's range. Good records are copied
byte for byte under DIGITS's `%08d_%d` keys into a fresh LMDB of our dataset folder layout; bad
ones are listed with the reason and never trained on. The mean is recomputed from the records
that were kept.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import lmdb
import numpy as np

from datasets.build import (
    BuildCancelled,
    BuildError,
    BuildResult,
    ImageOptions,
    LmdbWriter,
    write_mean_files,
    write_metadata,
)
from datasets.images import ImageLimits, ImageRefused, check_image_size, set_image_limits
from datasets.names import os_error_text
from datasets.sources import SourceError, read_labels_file
from trainer.datum import Datum, DatumError, decode_datum

SPLITS = ("train", "val", "test")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def digits_sources(folder: Path) -> tuple[dict[str, Path], Path | None]:
    """The split LMDBs and labels file of a DIGITS dataset job folder."""
    sources = {s: folder / f"{s}_db" for s in SPLITS if (folder / f"{s}_db" / "data.mdb").is_file()}
    if "train" not in sources:
        raise SourceError(f"{folder}: not a DIGITS dataset folder (no train_db/data.mdb)")
    labels = folder / "labels.txt"
    return sources, labels if labels.is_file() else None


def _open(path: Path, split: str) -> lmdb.Environment:
    if path.is_dir() and not (path / "data.mdb").is_file():
        raise BuildError(f"{split} LMDB {path}: no data.mdb in this folder")
    try:
        return lmdb.open(str(path), readonly=True, lock=False, readahead=False, subdir=path.is_dir(), max_readers=4)
    except lmdb.Error as exc:
        raise BuildError(f"{split} LMDB {path}: not an LMDB database ({exc})") from None


def _encoding(value: bytes, datum_encoded: bool) -> str:
    if not datum_encoded:
        return "none"
    return "png" if PNG_MAGIC in value[:64] else "jpg"


class _Copy:
    """What the copy has kept so far: one writer per split, the class counts, the first record's
    shape and encoding (every other record must match it), the train mean and the skipped list."""

    def __init__(self, out_dir: Path, labels: list[str] | None):
        self.out_dir = out_dir
        self.labels = labels
        self.writers: dict[str, LmdbWriter] = {}
        self.counts: dict[str, list[int]] = {}
        self.skipped: list[dict] = []
        self.shape: tuple[int, int, int] | None = None
        self.encoding = "none"
        self.mean_sum: np.ndarray | None = None
        self.mean_n = 0
        self.max_label = -1

    def open_split(self, split: str) -> None:
        self.writers[split] = LmdbWriter(self.out_dir / f"{split}_db", map_size=1 << 28)
        self.counts[split] = [0] * (len(self.labels) if self.labels else 0)

    def skip(self, where: str, split: str, reason: str) -> None:
        self.skipped.append({"path": where, "split": split, "reason": reason})

    def refusal(self, value: bytes, chw: np.ndarray, label: int) -> str | None:
        """Why this decoded record cannot be kept, or None; the first record sets the shape."""
        if self.shape is None:
            self.shape = chw.shape
            probe = Datum()
            probe.ParseFromString(value)
            self.encoding = _encoding(probe.data, probe.encoded)
        if chw.shape != self.shape:
            shape, first = "x".join(map(str, chw.shape)), "x".join(map(str, self.shape))
            return f"shape {shape} differs from the first record's {first}"
        if label < 0 or (self.labels is not None and label >= len(self.labels)):
            limit = f"0..{len(self.labels) - 1}" if self.labels else "0 or more"
            return f"label {label} is out of range ({limit})"
        return None

    def keep(self, split: str, value: bytes, chw: np.ndarray, label: int) -> None:
        """Copy the record byte for byte under DIGITS's key; count it; add train images to the mean."""
        self.max_label = max(self.max_label, label)
        counts = self.counts[split]
        if label >= len(counts):
            counts += [0] * (label + 1 - len(counts))
        writer = self.writers[split]
        writer.put(b"%08d_%d" % (writer.count, label), value)
        counts[label] += 1
        if split == "train":
            self.mean_sum = chw.astype(np.float64) if self.mean_sum is None else self.mean_sum + chw
            self.mean_n += 1

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()


def _validate_and_copy(
    sources: dict[str, Path], out_dir: Path, name: str, labels: list[str] | None, report: Callable[[int, int], None]
) -> dict:
    envs = {split: _open(path, split) for split, path in sources.items()}
    total = sum(int(env.stat()["entries"]) for env in envs.values())
    copy = _Copy(out_dir, labels)
    try:
        done = _copy_records(envs, copy, total, report)
    finally:
        copy.close()
        for env in envs.values():
            env.close()
    report(done, total)
    return _finish(copy, sources, out_dir, name)


def _copy_records(envs: dict[str, lmdb.Environment], copy: _Copy, total: int, report) -> int:
    """Validate every record of every split in order; returns how many were read."""
    done = 0
    last = time.monotonic()
    for split in SPLITS:
        if split not in envs:
            continue
        copy.open_split(split)
        with envs[split].begin(buffers=False) as txn:
            for key, value in txn.cursor():
                done += 1
                where = f"{split} record {key.decode('ascii', errors='backslashreplace')}"
                try:
                    # Each record's sides are judged as any user image's, before its pixels are read.
                    chw, label = decode_datum(value, key=key, check_size=check_image_size)
                except (DatumError, ImageRefused) as exc:
                    copy.skip(where, split, str(exc).split(": ", 1)[-1] if isinstance(exc, DatumError) else str(exc))
                    continue
                reason = copy.refusal(value, chw, label)
                if reason is not None:
                    copy.skip(where, split, reason)
                    continue
                copy.keep(split, value, chw, label)
                if time.monotonic() - last >= 0.5:
                    last = time.monotonic()
                    report(done, total)
    return done


def _finish(copy: _Copy, sources: dict[str, Path], out_dir: Path, name: str) -> dict:
    """Refuse an unusable train split; write the mean and the metadata of the splits kept."""
    n_train = copy.writers["train"].count if "train" in copy.writers else 0
    if n_train == 0:
        first = "; ".join(f"{s['path']}: {s['reason']}" for s in copy.skipped[:2])
        entries = int(sum(1 for s in copy.skipped if s["split"] == "train"))
        raise BuildError(
            f"train LMDB {sources['train']}: none of its {entries} records is a usable Caffe Datum"
            + (f" ({first})" if first else "")
        )
    labels = copy.labels if copy.labels is not None else [str(i) for i in range(copy.max_label + 1)]
    splits = {}
    for split, writer in copy.writers.items():
        if writer.count:
            class_counts = copy.counts[split] + [0] * (len(labels) - len(copy.counts[split]))
            splits[split] = {"db": f"{split}_db", "count": writer.count, "class_counts": class_counts}
        else:
            shutil.rmtree(writer.path, ignore_errors=True)
    assert copy.shape is not None and copy.mean_sum is not None
    write_mean_files(out_dir, copy.mean_sum / copy.mean_n)
    c, h, w = copy.shape
    options = ImageOptions(width=w, height=h, channels=c, resize_mode="squash", encoding=copy.encoding)
    write_metadata(out_dir, name=name, options=options, labels=labels, splits=splits)
    return {"labels": labels, "splits": splits, "skipped": copy.skipped, "options": options.__dict__}


def _child(sources, out_dir, name, labels, limits: ImageLimits, messages) -> None:
    set_image_limits(limits)
    try:
        result = _validate_and_copy(
            sources, out_dir, name, labels, lambda done, total: messages.put(("progress", done, total))
        )
    except (BuildError, SourceError) as exc:
        messages.put(("error", str(exc)))
    except Exception as exc:  # noqa: BLE001 -- reported to the user, not lost in a child
        # An OSError would name the temp folder being written (the service scrubs other text).
        messages.put(("error", f"LMDB import failed: {type(exc).__name__}: {os_error_text(exc)}"))
    else:
        messages.put(("done", result))


def import_lmdbs(
    sources: dict[str, Path],
    out_dir: Path,
    *,
    name: str,
    labels_file: Path | None,
    limits: ImageLimits,
    progress: Callable[[int, int, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[BuildResult, ImageOptions]:
    """Validate and copy the LMDBs in a child process; returns the result and the image shape."""
    labels = read_labels_file(labels_file) if labels_file else None
    for split, path in sources.items():
        if not path.exists():
            raise SourceError(f"{split} LMDB {path}: does not exist")
    out_dir.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    child = context.Process(target=_child, args=(sources, out_dir, name, labels, limits, messages), daemon=True)
    start = time.monotonic()
    child.start()
    try:
        while True:
            if should_stop is not None and should_stop():
                raise BuildCancelled()
            try:
                message = messages.get(timeout=0.5)
            except queue_module.Empty:
                if not child.is_alive():
                    raise BuildError(
                        f"the LMDB validator process died (exit code {child.exitcode}); "
                        "the database is probably damaged"
                    ) from None
                continue
            if message[0] == "progress":
                if progress is not None:
                    done, total = message[1], message[2]
                    progress(done, total, done / max(time.monotonic() - start, 1e-6))
            elif message[0] == "error":
                raise BuildError(message[1])
            else:
                data = message[1]
                break
    finally:
        if child.is_alive():
            child.terminate()
        child.join(timeout=10)
    seconds = time.monotonic() - start
    total = sum(s["count"] for s in data["splits"].values()) + len(data["skipped"])
    result = BuildResult(
        labels=data["labels"],
        splits=data["splits"],
        skipped=data["skipped"],
        seconds=seconds,
        images_per_second=total / max(seconds, 1e-6),
    )
    return result, ImageOptions(**data["options"])
