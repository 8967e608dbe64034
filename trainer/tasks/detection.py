"""Object detection: boxes with classes; torchvision's detectors (never downloaded weights), joint
augmentation of image and boxes with transforms.v2, COCO mAP by torchmetrics on faster-coco-eval.

The detectors take a list of images and their targets and return a dict of losses in train mode
and detections in eval mode; this module hides that, so the engine's loop is the classifier's.
Class indexes are stored 0-based (labels.txt); the detectors keep 0 for the background, so the
model sees class + 1. Ignore regions (KITTI DontCare, COCO iscrowd, VOC difficult) are left out of
the training targets and passed to the metric as crowd regions, where they count neither as a
miss nor as a false positive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from PIL import Image
from torch import nn
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.models import detection
from torchvision.transforms import v2

from trainer.config import TrainConfig
from trainer.data import Normalize, move
from trainer.dataset_folder import DatasetInfo
from trainer.datum import DatumLMDB
from trainer.networks import InputSpec
from trainer.preprocess import uint8_batch
from trainer.protocol import DETECTION, TASK_METRICS, TASK_NETWORKS, TASK_TRAITS
from trainer.targets import decode_boxes
from trainer.tasks.base import as_rgb, image_tensor, model_from_state, seeded, with_seed
from trainer.versions import OverlaidLMDB, open_images, open_targets

# Below this score a detection does not count as one in the run's words ("no box scored above").
SCORE_FLOOR = 0.05
MAP_SERIES = TASK_METRICS[DETECTION]  # the COCO numbers a validation reports


def _builder(name: str) -> Callable[..., nn.Module]:
    return getattr(detection, name)


# The stride of each detector's finest feature map (what its box heads see first); a test probes
# the backbones so that this table cannot go stale. SSDlite resizes to its own 320 px.
FINEST_STRIDE = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": 32,
    "fasterrcnn_mobilenet_v3_large_fpn": 32,
    "fasterrcnn_resnet50_fpn_v2": 4,
    "retinanet_resnet50_fpn_v2": 8,
    "fcos_resnet50_fpn": 8,
}
# Cells across the finest feature map below which a detector cannot place boxes: 64 px images
# kept at 64 px gave the MobileNet detectors a 2x2 map and mAP50 0.06 after 240 steps of the
# bench's shapes; upscaled to 128 (4x4), 0.68 (docs/benchmarks.md).
MIN_CELLS = 4


def detector_side(name: str, height: int, width: int) -> tuple[int, int]:
    """The (short, long) sides `name`'s own transform resizes images to: the dataset's own (the
    builders' default of 800 px costs small images ~40x the compute for nothing), but never under
    MIN_CELLS cells of its finest feature map."""
    short, long = min(height, width), max(height, width)
    floor = MIN_CELLS * FINEST_STRIDE.get(name, 1)
    if short >= floor:
        return short, long
    return floor, -(-long * floor // short)  # the long side scaled alike, rounded up


def build_detector(name: str, spec: InputSpec) -> nn.Module:
    """`name` for the dataset's classes (+ background), without any downloaded weights; the
    R-CNN, RetinaNet and FCOS transforms resize to `detector_side`."""
    kwargs: dict[str, Any] = {"weights": None, "weights_backbone": None, "num_classes": spec.num_classes + 1}
    if not name.startswith("ssdlite"):
        kwargs["min_size"], kwargs["max_size"] = detector_side(name, spec.height, spec.width)
    return _builder(name)(**kwargs)


class DetectionDataset(Dataset):
    """Items: (uint8 C x H x W image, {"boxes": N x 4 xyxy, "labels": N, "ignore": N bool})."""

    def __init__(
        self, images: DatumLMDB | OverlaidLMDB, targets: DatumLMDB | OverlaidLMDB, *, transform: v2.Transform | None
    ) -> None:
        self.images, self.targets, self.transform = images, targets, transform

    def __len__(self) -> int:
        return len(self.images)

    def close(self) -> None:
        self.images.close()
        self.targets.close()

    def __getitem__(self, item: int | tuple[int, int]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        index, seed = seeded(item)
        chw, _ = self.images[index]
        rows = torch.from_numpy(decode_boxes(self.targets.raw(index), where=f"{self.targets.path} record {index}"))
        height, width = chw.shape[1:]
        image = tv_tensors.Image(image_tensor(chw))
        target = {
            "boxes": tv_tensors.BoundingBoxes(rows[:, 1:5], format="XYXY", canvas_size=(height, width)),
            "labels": rows[:, 0].long(),
            "ignore": rows[:, 5] > 0,
        }
        if self.transform is not None:
            image, target = with_seed(seed, lambda: self.transform(image, target))
        return image.as_subclass(torch.Tensor), {
            "boxes": target["boxes"].as_subclass(torch.Tensor).float(),
            "labels": target["labels"],
            "ignore": target["ignore"],
        }


def collate(batch: list) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
    """Stored images share one size: they stack as the classifier's do; targets stay a list."""
    return torch.stack([image for image, _ in batch]), [target for _, target in batch]


def train_transform(cfg: TrainConfig, height: int, width: int) -> v2.Transform:
    """Flip, scale jitter and a crop back to the stored size; boxes cut by the crop are clipped
    and the ones left too small are dropped with their labels (SanitizeBoundingBoxes)."""
    steps: list[v2.Transform] = []
    if cfg.data.random_flip:
        steps.append(v2.RandomHorizontalFlip())
    steps += [
        v2.ScaleJitter(target_size=(height, width), scale_range=(0.75, 1.25), antialias=True),
        v2.RandomCrop((height, width), pad_if_needed=True),
        v2.ClampBoundingBoxes(),
        v2.SanitizeBoundingBoxes(min_size=1.0, labels_getter=lambda inputs: (inputs[1]["labels"], inputs[1]["ignore"])),
    ]
    return v2.Compose(steps)


class MeanAP:
    """COCO mAP over the split, scored once on rank 0 and sent to the others.

    Each rank keeps its shard's detections and targets on the CPU; `compute` gathers them on
    rank 0 in one collective whatever the shard sizes. torchmetrics' own sync makes one collective
    per image, so an odd split (shards one image apart) put the ranks out of step and gloo aborted.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.predictions: list[dict[str, torch.Tensor]] = []
        self.targets: list[dict[str, torch.Tensor]] = []
        self.notes: list[str] = []

    def update(self, model: nn.Module, x: torch.Tensor, targets: list[dict[str, torch.Tensor]]) -> None:
        predictions = model(list(as_rgb(x)))
        self.predictions += [
            {key: (p[key] if key == "labels" else p[key].float()).cpu() for key in ("boxes", "scores", "labels")}
            for p in predictions
        ]
        self.targets += [
            {"boxes": t["boxes"].cpu(), "labels": t["labels"].cpu() + 1, "iscrowd": t["ignore"].long().cpu()}
            for t in targets
        ]

    def compute(self, *, world: int) -> dict[str, float]:
        if world == 1:
            return self._score([(self.predictions, self.targets)])
        rank = torch.distributed.get_rank()
        shards: list | None = [None] * world if rank == 0 else None
        torch.distributed.gather_object((self.predictions, self.targets), shards, dst=0)
        result = self._score(shards) if rank == 0 else dict.fromkeys(MAP_SERIES, 0.0)
        values = torch.tensor([result[name] for name in MAP_SERIES], dtype=torch.float64, device=self.device)
        torch.distributed.broadcast(values, src=0)
        return dict(zip(MAP_SERIES, values.tolist(), strict=True))

    def _score(self, shards: list) -> dict[str, float]:
        from torchmetrics.detection import MeanAveragePrecision  # lazily: a second of import for detection only

        # Rank r holds the split's images r, r + world, ... (the unshuffled ShardedSampler):
        # interleaved back, the images come in the split's order, as one process scores them.
        predictions, targets = [], []
        for k in range(max(len(shard[0]) for shard in shards)):
            for shard_predictions, shard_targets in shards:
                if k < len(shard_predictions):
                    predictions.append(shard_predictions[k])
                    targets.append(shard_targets[k])
        # No sync at compute: the shards are all here already, and only rank 0 scores.
        metric = MeanAveragePrecision(
            box_format="xyxy", iou_type="bbox", backend="faster_coco_eval", sync_on_compute=False
        )
        metric.update(predictions, targets)
        found = metric.compute()
        self._explain(found, scored=sum(int((p["scores"] >= SCORE_FLOOR).sum()) for p in predictions))
        # COCO's -1 means "no ground truth to judge by": the run says so instead of charting -1.
        return {name: max(0.0, float(found[name])) for name in MAP_SERIES}

    def _explain(self, found: dict[str, torch.Tensor], *, scored: int) -> None:
        if scored == 0:
            self.notes.append(
                f"no box scored above {SCORE_FLOOR} on the validation images: the detector has not found anything "
                f"yet; if this lasts, check the class table and the box sizes"
            )
        elif float(found["map"]) < 0:
            self.notes.append("the validation split holds no boxes to judge by: its mAP is shown as 0")


class DetectionTask:
    name = DETECTION
    networks = TASK_NETWORKS[DETECTION]
    metrics = TASK_METRICS[DETECTION]
    traits = TASK_TRAITS[DETECTION]

    @staticmethod
    def collate(batch: list) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        return collate(batch)

    def build_model(self, name: str, spec: InputSpec) -> nn.Module:
        return build_detector(name, spec)

    def dataset(self, info: DatasetInfo, split: str, *, cfg: TrainConfig, train: bool) -> DetectionDataset:
        where = info.splits[split]
        transform = train_transform(cfg, info.image_height, info.image_width) if train else None
        return DetectionDataset(open_images(where), open_targets(where), transform=transform)

    def normalize(self, info: DatasetInfo, cfg: TrainConfig) -> Normalize:
        # The detectors normalise with their own mean and std inside; they take 0..1 pixels.
        return Normalize(None, channels_last=cfg.channels_last)

    def to_device(self, targets: list[dict[str, torch.Tensor]], device: torch.device) -> list[dict[str, torch.Tensor]]:
        return move(targets, device)

    def loss(
        self, model: nn.Module, x: torch.Tensor, targets: list[dict[str, torch.Tensor]]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        kept = [{"boxes": t["boxes"][~t["ignore"]], "labels": t["labels"][~t["ignore"]] + 1} for t in targets]
        losses = model(list(as_rgb(x)), kept)
        parts = {name.removeprefix("loss_"): value.detach() for name, value in losses.items()}
        return sum(losses.values()), parts

    def evaluator(self, info: DatasetInfo, device: torch.device) -> MeanAP:
        return MeanAP(device)

    def forward(self, model: nn.Module, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        return model(list(as_rgb(x)))

    def synthetic_targets(
        self, spec: InputSpec, batch: int, generator: torch.Generator
    ) -> list[dict[str, torch.Tensor]]:
        """One to four boxes per image, each a fifth to a half of the image's side, in the loader's
        layout (xyxy pixels, 0-based labels, no ignore regions)."""
        side = torch.tensor([spec.width, spec.height, spec.width, spec.height], dtype=torch.float32)
        targets = []
        for _ in range(batch):
            count = int(torch.randint(1, 5, (1,), generator=generator))
            corner = torch.rand(count, 2, generator=generator) * 0.5
            size = 0.2 + torch.rand(count, 2, generator=generator) * 0.3
            boxes = torch.cat([corner, corner + size], dim=1) * side
            labels = torch.randint(0, spec.num_classes, (count,), generator=generator)
            targets.append({"boxes": boxes, "labels": labels, "ignore": torch.zeros(count, dtype=torch.bool)})
        return targets

    def predictor(self, state: dict[str, Any], device: str | torch.device = "cpu") -> Detector:
        """What inference runs for a checkpoint's state: a Detector (boxes, classes, scores)."""
        return Detector(model_from_state(self, state), state["labels"], state["preprocessing"], device)


class Detector:
    """Boxes with class and score for images of any size: resized as in training, detected,
    and the boxes scaled back to each image's own pixels (squash, the tasks' stored resize)."""

    task = DETECTION

    def __init__(self, model: nn.Module, labels: list[str], preprocessing: dict[str, Any], device="cpu") -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.labels, self.preprocessing = labels, preprocessing
        self.normalize = Normalize(None).to(self.device)

    @torch.no_grad()
    def detect(self, images: list[Image.Image], *, min_score: float = 0.05) -> list[list[dict[str, Any]]]:
        x = self.normalize(torch.from_numpy(uint8_batch(images, self.preprocessing)).to(self.device))
        found = []
        for image, out in zip(images, self.model(list(as_rgb(x))), strict=True):
            sx, sy = image.size[0] / self.preprocessing["width"], image.size[1] / self.preprocessing["height"]
            keep = out["scores"] >= min_score
            found.append(
                [
                    {"label": self.labels[int(k) - 1], "score": float(s), "box": [x1 * sx, y1 * sy, x2 * sx, y2 * sy]}
                    for (x1, y1, x2, y2), s, k in zip(
                        out["boxes"][keep].tolist(),
                        out["scores"][keep].tolist(),
                        out["labels"][keep].tolist(),
                        strict=True,
                    )
                ]
            )
        return found
