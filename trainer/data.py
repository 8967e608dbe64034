"""The input pipeline: LMDB -> decode/augment (DataLoader workers) -> device -> normalise.

Three stages overlap: workers read and decode batches ahead (`prefetch_factor` per worker),
the device prefetcher copies batch n+1 to the GPU on a side stream while batch n computes, and
normalisation runs on the device on the whole batch. Batches cross process and PCIe boundaries
as uint8 (4x less than float32); mean subtraction and scaling happen on the device.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from trainer import preflight
from trainer.config import ConfigError, TrainConfig
from trainer.dataset_folder import DatasetInfo
from trainer.stopping import ignore_stop_signals, stop_signals_held


def _crop_box(h: int, w: int, size: int, rng: np.random.Generator | None) -> tuple[int, int]:
    if rng is None:  # centre crop, as at validation and inference time
        return (h - size) // 2, (w - size) // 2
    return int(rng.integers(0, h - size + 1)), int(rng.integers(0, w - size + 1))


class LMDBImageDataset(Dataset):
    """Items are (uint8 C x H x W tensor, label). Indices may be (index, augmentation seed) pairs:
    the augmentation of a sample depends only on that seed, not on which worker or process
    draws it, so a resumed run sees exactly the crops and flips of an uninterrupted one."""

    def __init__(
        self,
        db,  # trainer.datum.DatumLMDB
        *,
        crop_size: int | None = None,
        train: bool = False,
        hflip: bool = False,
        vflip: bool = False,
    ) -> None:
        self.db = db
        self.crop_size = crop_size
        self.train = train
        self.hflip = hflip and train
        self.vflip = vflip and train

    def __len__(self) -> int:
        return len(self.db)

    def close(self) -> None:
        self.db.close()

    def __getitem__(self, item: int | tuple[int, int]) -> tuple[torch.Tensor, int]:
        index, seed = item if isinstance(item, tuple) else (item, 0)
        image, label = self.db[index]
        rng = np.random.default_rng(seed) if self.train else None
        if self.crop_size is not None:
            top, left = _crop_box(image.shape[1], image.shape[2], self.crop_size, rng)
            image = image[:, top : top + self.crop_size, left : left + self.crop_size]
        if rng is not None:
            if self.hflip and rng.random() < 0.5:
                image = image[:, :, ::-1]
            if self.vflip and rng.random() < 0.5:
                image = image[:, ::-1, :]
        return torch.from_numpy(np.ascontiguousarray(image)), label


class ShardedSampler(Sampler):
    """Deterministic order per (seed, epoch), sharded over `world` processes.

    Training drops the incomplete last global batch, so every process runs the same number of
    equal-sized steps, and process r's k-th batch holds the global batch's elements r, r+world, ...
    Hence N processes with batch B/N each see exactly the samples one process with batch B sees.
    `start_batch` skips batches already trained (mid-epoch resume) without loading them.
    """

    def __init__(
        self,
        size: int,
        *,
        rank: int = 0,
        world: int = 1,
        seed: int = 0,
        shuffle: bool = True,
        global_batch: int | None = None,
    ) -> None:
        self.size, self.rank, self.world, self.seed, self.shuffle = size, rank, world, seed, shuffle
        self.global_batch = global_batch
        self.epoch = 0
        self.start_batch = 0

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        self.epoch, self.start_batch = epoch, start_batch

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.size))
        gen = torch.Generator()
        gen.manual_seed(self.seed * 100_003 + self.epoch)
        return torch.randperm(self.size, generator=gen).tolist()

    def _mine(self) -> list[int]:
        order = self._order()
        if self.global_batch:
            order = order[: self.size // self.global_batch * self.global_batch]
        mine = order[self.rank :: self.world]
        if self.global_batch:
            mine = mine[self.start_batch * (self.global_batch // self.world) :]
        return mine

    def __iter__(self) -> Iterator[tuple[int, int]]:
        base = (self.seed * 1_000_003 + self.epoch) * (self.size + 1)
        return iter([(i, (base + i) % (1 << 63)) for i in self._mine()])

    def __len__(self) -> int:
        return len(self._mine())


class Normalize:
    """uint8 N x C x H x W on the device -> float (x - mean) / 255 [/ std], optionally channels_last.

    `std` (per channel, of 0..1 pixels) comes with pretrained weights' own normalisation, whose
    mean is then theirs too (`weights_mean`)."""

    def __init__(
        self, mean: torch.Tensor | None, *, std: torch.Tensor | None = None, channels_last: bool = False
    ) -> None:
        self.mean = mean
        self.std = std
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        # (x - mean) / 255 / std as x * scale - shift: one multiply and one subtract in place on
        # the converted batch instead of a new tensor and three passes (half the time of the
        # loop's normalise on a CPU, bench/bench_recipes.py's stages).
        self.scale = 1.0 / 255 if std is None else 1.0 / (255 * std)
        self.shift = None if mean is None else mean * self.scale

    def to(self, device: torch.device) -> Normalize:
        mean = None if self.mean is None else self.mean.to(device)
        out = Normalize(mean, std=None if self.std is None else self.std.to(device))
        out.memory_format = self.memory_format
        return out

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        x = batch.float()
        x = x.mul_(self.scale) if x is not batch else x * self.scale  # a float batch is the caller's
        if self.shift is not None:
            x = x.sub_(self.shift)
        return x.contiguous(memory_format=self.memory_format)


def weights_normalize(values: list[float], channels: int) -> torch.Tensor:
    """Pretrained weights' per-channel mean or std as a C x 1 x 1 tensor for `channels` channels
    (an RGB triple averaged for gray images: the stem's weights are summed over RGB for them)."""
    tensor = torch.tensor(values, dtype=torch.float32)
    if channels == 1 and tensor.numel() == 3:
        tensor = tensor.mean(dim=0, keepdim=True)
    return tensor.view(-1, 1, 1)


def mean_tensor(info: DatasetInfo, mode: str, crop_size: int | None) -> torch.Tensor | None:
    """The mean to subtract: the image mean (its centre crop when cropping), its per-channel
    average (`pixel`), or None."""
    if mode == "none":
        return None
    mean = info.mean_image()
    if mean is None:
        raise ConfigError(f"data.mean_subtraction: {mode!r} but the dataset {info.path} has no mean image")
    if mode == "pixel":
        return torch.from_numpy(mean.mean(axis=(1, 2))).view(-1, 1, 1).float()
    if crop_size is not None:
        top, left = _crop_box(mean.shape[1], mean.shape[2], crop_size, None)
        mean = mean[:, top : top + crop_size, left : left + crop_size]
    return torch.from_numpy(np.ascontiguousarray(mean)).float()


def normalized(images: torch.Tensor, targets: Any, *, step: int, normalize: Callable) -> tuple[torch.Tensor, Any]:
    """A train batch without recipe augmentations (detection, segmentation): normalised only."""
    return normalize(images), targets


@dataclass
class Data:
    train_loader: DataLoader
    val_loader: DataLoader | None
    train_sampler: ShardedSampler
    steps_per_epoch: int  # optimizer steps (global batches) per epoch
    normalize: Normalize
    input_shape: tuple[int, int, int]
    train_count: int
    val_count: int
    # The train batch's way to the network: trainer/augment.py's TrainAugment for classification.
    augment: Callable[..., tuple[torch.Tensor, Any]] = normalized

    def close(self) -> None:
        """Releases this process's LMDB handles. A trainer process exits anyway; one called as a
        library (tests, notebooks) lives on, and py-lmdb refuses to open a path again while a
        handle to it is open, say for a new dataset built where a deleted one was."""
        for loader in (self.train_loader, self.val_loader):
            if loader is not None:
                loader.dataset.close()


def input_shape(cfg: TrainConfig, info: DatasetInfo) -> tuple[int, int, int]:
    """(channels, height, width) of the network's input; the crop fits: the pre-flight said so."""
    return preflight.input_shape(cfg, preflight.facts_of(info))


_LOADER_START = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


def _worker_init(worker_id: int) -> None:
    # The runs app stops a run by signalling its whole process group. Workers must not die of
    # that SIGTERM (the loop would see "DataLoader worker killed" instead of stopping cleanly):
    # the training process decides, and shuts its workers down itself. They were started with
    # the signal held (DevicePrefetcher), so one sent while they started is dropped here.
    ignore_stop_signals()


def build_data(
    cfg: TrainConfig, info: DatasetInfo, *, task, rank: int = 0, world: int = 1, pin_memory: bool = False
) -> Data:
    """The loaders of `task` (trainer.tasks: its datasets, collate and normalisation)."""
    train_set = task.dataset(info, "train", cfg=cfg, train=True)
    train_count = len(train_set)
    steps = train_count // cfg.batch_size
    if steps == 0:
        raise ConfigError(f"batch_size: {cfg.batch_size} is larger than the {train_count} training images")
    workers = cfg.data.num_workers
    loader_kw = dict(
        num_workers=workers,
        pin_memory=pin_memory,  # pinned pages make the H2D copy async
        persistent_workers=workers > 0,  # keep worker LMDB handles across epochs
        prefetch_factor=cfg.data.prefetch_factor if workers else None,
        # Its own generator: otherwise every new epoch iterator draws its worker seed from the
        # global torch RNG, and a resumed run's dropout stream would drift from the original's.
        generator=torch.Generator().manual_seed(cfg.seed),
        worker_init_fn=_worker_init if workers else None,
        # Forked, as in a one-process run and under torchrun: a rank started by the launcher's
        # spawn context inherits "spawn" as its default, and each of its workers then imported
        # torch anew (seconds each, on every validation's fresh workers: 6 steps of LeNet with
        # two ranks of two workers took 40 s instead of 2). Workers never touch the GPU.
        multiprocessing_context=_LOADER_START if workers else None,
        collate_fn=task.collate,
    )
    sampler = ShardedSampler(
        train_count, rank=rank, world=world, seed=cfg.seed, shuffle=True, global_batch=cfg.batch_size
    )
    train_loader = DataLoader(train_set, batch_size=cfg.micro_batch, sampler=sampler, drop_last=True, **loader_kw)
    val_loader, val_count = None, 0
    if "val" in info.splits:
        val_set = task.dataset(info, "val", cfg=cfg, train=False)
        val_count = len(val_set)
        val_sampler = ShardedSampler(val_count, rank=rank, world=world, shuffle=False)
        val_loader = DataLoader(
            val_set, batch_size=cfg.per_process_batch, sampler=val_sampler, **{**loader_kw, "persistent_workers": False}
        )
    return Data(
        train_loader,
        val_loader,
        sampler,
        steps,
        task.normalize(info, cfg),
        input_shape(cfg, info),
        train_count,
        val_count,
    )


def move(value: Any, device: torch.device) -> Any:
    """Tensors inside lists and dicts to `device` (detection targets are a list of dicts)."""
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {key: move(item, device) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(move(item, device) for item in value)
    return value


def tensors_in(value: Any) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)


class DevicePrefetcher:
    """Iterates a loader, moving each batch to `device`; on CUDA the copy of batch n+1 runs on a
    side stream while batch n computes. Accumulates the time spent waiting for data."""

    def __init__(self, loader: DataLoader, device: torch.device) -> None:
        self.loader, self.device = loader, device
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None

    def __iter__(self) -> Iterator[tuple[torch.Tensor, Any]]:
        with stop_signals_held():  # this may start the loader's workers: see trainer.stopping
            it = iter(self.loader)
        if not self.cuda:
            for images, targets in it:
                yield images, targets
            return
        nxt = self._copy(next(it, None))
        while nxt is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
            for tensor in tensors_in(nxt):
                tensor.record_stream(torch.cuda.current_stream(self.device))
            images, targets = nxt
            nxt = self._copy(next(it, None))
            yield images, targets

    def _copy(self, batch: tuple[torch.Tensor, Any] | None):
        if batch is None:
            return None
        with torch.cuda.stream(self.stream):
            # Targets may be a tensor of labels, a batch of masks or a list of box dicts.
            return move(batch[0], self.device), move(batch[1], self.device)
