"""The parallel LMDB builder: worker processes decode + convert + resize + encode, one writer.

Memory stays flat whatever the dataset size: images go to the workers in small chunks, at most a
few chunks are in flight, each worker returns the encoded Datum bytes and the pixel sum of its
train images (for the mean), and the writer puts them into the LMDB in batched transactions in the
order they were planned. Keys are DIGITS's `%08d_%d` (index within the split, label).

No Django here: the Celery task, `import_dataset --sync` and the benchmark call `build_lmdbs`
with callbacks for progress and cancellation.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from pathlib import Path

import lmdb
import numpy as np
from PIL import Image

from datasets.images import ImageLimits, ImageRefused, image_limits, prepare_image, set_image_limits
from datasets.labels.prepare import open_image, prepare_annotated
from datasets.labels.registry import reads_label_files
from datasets.labels.stats import LabelStats
from datasets.names import os_error_text
from trainer.datum import encode_datum, write_mean_blobproto
from trainer.protocol import CLASSIFICATION

FORMAT_VERSION = 1
SPLITS = ("train", "val", "test")
CHUNK_SIZE = 32  # at most 257, so a chunk's pixel sum fits uint16
CHUNK_BYTES = 16 * 1024 * 1024
COMMIT_EVERY = 512
COMMIT_BYTES = 32 * 1024 * 1024  # a transaction holds at most this much, so memory stays bounded
INITIAL_MAP_SIZE = 1 << 30


class BuildError(ValueError):
    """The build cannot produce a usable dataset; the message says why."""


class BuildCancelled(Exception):
    """The user cancelled the build (seen through the `should_stop` callback)."""


@dataclass(frozen=True)
class ImageOptions:
    width: int = 256
    height: int = 256
    channels: int = 3
    resize_mode: str = "squash"
    encoding: str = "png"


@dataclass
class BuildResult:
    labels: list[str]
    splits: dict[str, dict]  # split -> {"db", "count", "class_counts"[, "targets_db"]}
    skipped: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    images_per_second: float = 0.0
    stats: dict | None = None  # detection and segmentation: datasets.labels.stats
    extra_files: dict[str, dict] = field(default_factory=dict)  # more JSON files for the folder, by name
    # split -> the source path of each stored image, in key order: the caller writes them, public,
    # as `<split>_names.json`, so a test's galleries name the files and not only their numbers.
    names: dict[str, list[str]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------


def init_worker(limits: ImageLimits) -> None:
    set_image_limits(limits)
    # One image per worker at a time: numpy's BLAS threads would only fight over the cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


_ATTACHED: dict[str, shared_memory.SharedMemory] = {}


def _slot(name: str) -> shared_memory.SharedMemory:
    slot = _ATTACHED.get(name)
    if slot is None:
        slot = _ATTACHED[name] = shared_memory.SharedMemory(name=name)
    return slot


def process_chunk(items: list[tuple], options: ImageOptions, slot: str | None = None):
    """items: (sequence number, path, label, counts towards the mean[, target]).

    Returns ([(seq, value, reason or None[, (target bytes, facts)])], uint16 pixel sum of the mean
    images or None, n). With a shared-memory `slot`, each value is an (offset, length) pair into it
    instead of bytes: the encoded images then cross to the writer with one copy instead of a pickle
    through a pipe. An item with a target (detection, segmentation) has its target resized with
    its image (datasets.labels.prepare), encoded, and sent inline beside it (a few bytes of boxes,
    a small PNG of a mask).
    """
    results = []
    total: np.ndarray | None = None
    n = 0
    buffer = _slot(slot).buf if slot else None
    offset = 0
    for seq, path, label, for_mean, *target in items:
        try:
            pixels, prepared = _prepare_one(path, target[0] if target else None, options, seed=seq)
        except ImageRefused as exc:
            results.append((seq, None, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 -- one odd file must never end a build
            results.append((seq, None, f"image cannot be processed ({type(exc).__name__}: {os_error_text(exc)})"))
            continue
        value = encode_datum(pixels, label, encoding=options.encoding)
        extra = (tuple(prepared),) if prepared else ()
        if buffer is not None and offset + len(value) <= len(buffer):
            buffer[offset : offset + len(value)] = value
            results.append((seq, (offset, len(value)), None, *extra))
            offset += len(value)
        else:
            results.append((seq, value, None, *extra))  # bigger than the slot expected: sent inline
        if for_mean:
            # A chunk (<= 32 images, see CHUNK_SIZE) of uint8 sums fits uint16 exactly (32 * 255 <
            # 65536) and crosses to the writer at a quarter of float64's size; it adds in float64.
            if total is None:
                total = pixels.astype(np.uint16)
            else:
                np.add(total, pixels, out=total)  # in place: no new array per image
            n += 1
    return results, total, n


def _prepare_one(path, target, options: ImageOptions, *, seed: int) -> tuple[np.ndarray, list | None]:
    """One item's pixels, and its resized target (boxes or mask) when it has one."""
    sizes = {"width": options.width, "height": options.height, "channels": options.channels}
    if target is not None:
        pixels, *prepared = prepare_annotated(path, target, resize_mode=options.resize_mode, seed=seed, **sizes)
        return pixels, prepared
    with open_image(path) as handle:  # no link followed, as for annotated images
        return prepare_image(handle, resize_mode=options.resize_mode, seed=seed, **sizes), None


# --------------------------------------------------------------------------------------------
# Writer side
# --------------------------------------------------------------------------------------------


class LmdbWriter:
    """Batched writes into a fresh LMDB folder; the map grows by doubling when full."""

    def __init__(self, path: Path, map_size: int = INITIAL_MAP_SIZE):
        self.path = path
        self.map_size = map_size
        # sync off during the build, one fsync at close: a crash mid-build leaves a temp folder
        # that is thrown away anyway.
        self.env = lmdb.open(
            str(path),
            map_size=map_size,
            subdir=True,
            sync=False,
            metasync=False,
            lock=True,
            readahead=False,
            meminit=False,
        )
        self.pending: list[tuple[bytes, bytes]] = []
        self.pending_bytes = 0
        self.count = 0

    def put(self, key: bytes, value: bytes) -> None:
        self.pending.append((key, value))
        self.pending_bytes += len(value)
        self.count += 1
        if len(self.pending) >= COMMIT_EVERY or self.pending_bytes >= COMMIT_BYTES:
            self.flush()

    def flush(self) -> None:
        while self.pending:
            try:
                with self.env.begin(write=True) as txn:
                    for key, value in self.pending:
                        txn.put(key, value)
                self.pending.clear()
                self.pending_bytes = 0
            except lmdb.MapFullError:
                self.map_size *= 2
                self.env.set_mapsize(self.map_size)

    def close(self) -> None:
        self.flush()
        self.env.sync(True)
        self.env.close()


def write_mean_files(folder: Path, mean_chw: np.ndarray) -> None:
    mean = np.asarray(mean_chw, dtype=np.float32)
    np.save(folder / "mean.npy", mean)
    mean_u8 = np.clip(np.rint(mean), 0, 255).astype(np.uint8).transpose(1, 2, 0)
    Image.fromarray(mean_u8[:, :, 0] if mean.shape[0] == 1 else mean_u8).save(folder / "mean.png")
    write_mean_blobproto(folder / "mean.binaryproto", mean)


def write_metadata(
    folder: Path,
    *,
    name: str,
    options: ImageOptions,
    labels: list[str],
    splits: dict[str, dict],
    task: str = CLASSIFICATION,
) -> None:
    """dataset.json and labels.txt, exactly as trainer.dataset_folder reads them."""
    meta = {
        "format_version": FORMAT_VERSION,
        "name": name,
        "image_width": options.width,
        "image_height": options.height,
        "channels": options.channels,
        "resize_mode": options.resize_mode,
        "encoding": options.encoding,
        "labels": list(labels),
        "splits": {s: splits[s] for s in SPLITS if s in splits and splits[s]["count"]},
        "mean": {"npy": "mean.npy", "png": "mean.png", "binaryproto": "mean.binaryproto"},
    }
    if task != CLASSIFICATION:
        meta["task"] = task  # absent means classification, as every folder before issue 22
    (folder / "dataset.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    (folder / "labels.txt").write_text("".join(f"{label}\n" for label in labels), encoding="utf-8")


def chunk_size_for(options: ImageOptions) -> int:
    """Images per chunk: CHUNK_SIZE, fewer for big images so a chunk stays under CHUNK_BYTES."""
    return max(1, min(CHUNK_SIZE, CHUNK_BYTES // raw_datum_bytes(options)))


def raw_datum_bytes(options: ImageOptions) -> int:
    return options.width * options.height * options.channels + 64  # pixels + Datum header


def _chunks(split_entries: dict[str, list[tuple]], size: int = CHUNK_SIZE) -> Iterator[list[tuple]]:
    """Entries are (path, label) or, with a target, (path, label, target)."""
    seq = 0
    chunk: list[tuple] = []
    for split in SPLITS:
        for path, label, *target in split_entries.get(split, []):
            chunk.append((seq, path, label, split == "train", *target))
            seq += 1
            if len(chunk) >= size:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover -- not Linux
        return os.cpu_count() or 1


class _Collector:
    """The writer side of a build: puts each chunk's images into their split's LMDB in the planned
    order, counts the classes, sums the train mean and lists what was skipped."""

    def __init__(
        self,
        split_entries: dict[str, list[tuple]],
        labels: list[str],
        out_dir: Path,
        options: ImageOptions,
        task: str = CLASSIFICATION,
    ):
        self.seq_split: list[tuple[str, str, int]] = []  # seq -> (split, path, label)
        for split in SPLITS:
            self.seq_split += [(split, entry[0], entry[1]) for entry in split_entries.get(split, [])]
        self.writers = {s: LmdbWriter(out_dir / f"{s}_db") for s in SPLITS if split_entries.get(s)}
        self.task = task
        # Detection and segmentation: the targets' LMDB per split, written with the images' keys.
        self.target_writers = (
            {s: LmdbWriter(out_dir / f"{s}_targets_db") for s in self.writers} if reads_label_files(task) else {}
        )
        self.stats = LabelStats(task, labels, options.width, options.height) if reads_label_files(task) else None
        self.class_counts = {s: [0] * len(labels) for s in self.writers}
        self.names: dict[str, list[str]] = {s: [] for s in self.writers}  # source paths in key order
        self.skipped: list[dict] = []
        self.mean_sum = np.zeros((options.height, options.width, options.channels), dtype=np.float64)
        self.mean_n = 0
        self.done = 0

    @property
    def total(self) -> int:
        return len(self.seq_split)

    def add(self, result, buffer=None) -> None:
        """One chunk's result from process_chunk (values inline, or offsets into `buffer`)."""
        rows, chunk_sum, n = result
        if chunk_sum is not None:
            self.mean_sum += chunk_sum
            self.mean_n += n
        for seq, value, reason, *target in rows:
            split, path, label = self.seq_split[seq]
            if value is None:
                self.skipped.append({"path": path, "split": split, "reason": reason})
                continue
            if isinstance(value, tuple):  # (offset, length) in the chunk's shared-memory slot
                value = bytes(buffer[value[0] : value[0] + value[1]])
            writer = self.writers[split]
            if target:
                # No class in the key: the image has none (its Datum label is -1).
                key = b"%08d" % writer.count
                target_value, facts = target[0]
                self.target_writers[split].put(key, target_value)
                for index in facts.classes:
                    self.class_counts[split][index] += 1
                self.stats.add(split, facts)
            else:
                key = b"%08d_%d" % (writer.count, label)
                self.class_counts[split][label] += 1
            writer.put(key, value)
            self.names[split].append(str(path))
        self.done += len(rows)

    def close(self) -> None:
        for writer in [*self.writers.values(), *self.target_writers.values()]:
            writer.close()

    def check_usable(self, labels: list[str]) -> None:
        """A dataset needs training images, and some of every class."""
        if not self.writers.get("train") or self.writers["train"].count == 0:
            reasons = sorted({s["reason"] for s in self.skipped})[:3]
            raise BuildError("no usable training images" + (f"; e.g. {'; '.join(reasons)}" if reasons else ""))
        if reads_label_files(self.task):
            # A class without training objects is said in the label statistics, not refused: a
            # segmentation source names VOC's 21 classes whether or not its masks use them all.
            if not any(self.class_counts["train"]):
                raise BuildError("no training image holds an object of any class (check the class table)")
            return
        empty = [labels[i] for i, c in enumerate(self.class_counts["train"]) if c == 0]
        if empty:
            raise BuildError(f"no usable training images for the classes: {', '.join(empty)}")

    def mean_chw(self) -> np.ndarray:
        return (self.mean_sum / max(self.mean_n, 1)).transpose(2, 0, 1)

    def splits(self) -> dict[str, dict]:
        """The splits that kept images; a split whose images were all skipped loses its folder."""
        splits = {}
        for split, writer in self.writers.items():
            if writer.count:
                splits[split] = {"db": f"{split}_db", "count": writer.count, "class_counts": self.class_counts[split]}
                if split in self.target_writers:
                    splits[split]["targets_db"] = f"{split}_targets_db"
            else:
                _remove_tree(writer.path)
                if split in self.target_writers:
                    _remove_tree(self.target_writers[split].path)
        return splits


class _Meter:
    """Asks `should_stop` about twice a second and reports `progress` every `every` seconds."""

    def __init__(self, total: int, progress, should_stop, every: float):
        self.total, self.progress, self.should_stop, self.every = total, progress, should_stop, every
        self.start = self.last_progress = self.last_stop_check = time.monotonic()

    def tick(self, done: int) -> None:
        now = time.monotonic()
        if self.should_stop is not None and now - self.last_stop_check >= min(0.5, self.every):
            self.last_stop_check = now
            if self.should_stop():
                raise BuildCancelled()
        if self.progress is not None and now - self.last_progress >= self.every:
            self.last_progress = now
            self.progress(done, self.total, done / max(now - self.start, 1e-6))


def build_lmdbs(
    split_entries: dict[str, list[tuple]],
    labels: list[str],
    out_dir: Path,
    *,
    name: str,
    options: ImageOptions,
    workers: int,
    limits: ImageLimits,
    progress: Callable[[int, int, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    progress_every: float = 1.0,
    task: str = CLASSIFICATION,
) -> BuildResult:
    """Build every split's LMDB, the mean files, labels.txt and dataset.json into `out_dir`.

    Entries are (path, label); for detection and segmentation (path, -1, target) with the target
    of datasets.labels.plan, written into `<split>_targets_db` beside the images.
    `workers=0` runs in this process (small builds). `should_stop()` is polled about twice a
    second; when it says yes, BuildCancelled is raised and the caller throws `out_dir` away.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    collector = _Collector(split_entries, labels, out_dir, options, task)
    meter = _Meter(collector.total, progress, should_stop, progress_every)

    def consume(result, buffer=None) -> None:
        collector.add(result, buffer)
        meter.tick(collector.done)

    try:
        if workers <= 0:
            previous = image_limits()  # this process's own: the build's are given back after it
            init_worker(limits)
            try:
                for chunk in _chunks(split_entries, chunk_size_for(options)):
                    consume(process_chunk(chunk, options))
            finally:
                set_image_limits(previous)
        else:
            _run_pool(split_entries, options, workers, limits, consume)
    finally:
        collector.close()

    collector.check_usable(labels)
    write_mean_files(out_dir, collector.mean_chw())
    splits = collector.splits()
    write_metadata(out_dir, name=name, options=options, labels=labels, splits=splits, task=task)
    seconds = time.monotonic() - meter.start
    done, total = collector.done, collector.total
    if progress is not None:
        progress(done, total, done / max(seconds, 1e-6))
    return BuildResult(
        labels=list(labels),
        splits=splits,
        skipped=collector.skipped,
        seconds=seconds,
        images_per_second=total / max(seconds, 1e-6),
        stats=collector.stats.as_dict() if collector.stats else None,
        names={split: collector.names[split] for split in splits},
    )


def _run_pool(split_entries, options: ImageOptions, workers: int, limits: ImageLimits, consume) -> None:
    # spawn, not fork: the Celery worker runs tasks in threads, and forking a threaded process
    # can copy a lock held by another thread into the child.
    context = multiprocessing.get_context("spawn")
    size = chunk_size_for(options)
    # One shared-memory slot per chunk in flight; a worker writes the chunk's encoded images into
    # it and the writer copies them out once, instead of pickling ~200 KB per image through a pipe.
    slot_bytes = size * (raw_datum_bytes(options) + 1024)
    slots = [shared_memory.SharedMemory(create=True, size=slot_bytes) for _ in range(workers * 2)]
    free = deque(range(len(slots)))
    in_flight: deque[tuple[Future, int]] = deque()

    def consume_oldest() -> None:
        future, index = in_flight.popleft()
        consume(future.result(), slots[index].buf)
        free.append(index)

    try:
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=init_worker, initargs=(limits,)
        ) as pool:
            try:
                for chunk in _chunks(split_entries, size):
                    if not free:  # bounded look-ahead keeps memory flat; results are used in order
                        consume_oldest()
                    index = free.popleft()
                    in_flight.append((pool.submit(process_chunk, chunk, options, slots[index].name), index))
                while in_flight:
                    consume_oldest()
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        for slot in slots:
            slot.close()
            slot.unlink()


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
