"""Test of a detector or a segmentation network on a split of its dataset (job.run_job's test
for these tasks; runs in the engine's child process, without Django).

Detection: COCO mAP by torchmetrics' `MeanAveragePrecision` on faster-coco-eval (the metric the
run's validation charted), per class (`class_metrics`), with each class's precision-recall curve
at IoU 0.5 read from the COCO evaluation's precision array (`extended_summary`), and each image's
own AP50, so the worst images come first. Segmentation: per-class IoU, Dice and pixel accuracy
from one confusion matrix (trainer.tasks.segmentation's), each image's mIoU for the worst first.
The worst images are saved as PNGs: the ground truth beside the prediction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from trainer.datum import DatumLMDB
from trainer.tasks.base import as_rgb
from trainer.tasks.detection import DetectionDataset, Detector
from trainer.tasks.segmentation import ConfusionMatrix, SegmentationDataset, Segmenter, pixel_pairs
from workbench.inference.engine import BATCH, MAX_MISTAKES, InferenceInputError, Progress
from workbench.inference.renderers import class_palette

# A predicted box drawn in the worst images' pictures scores at least this (the metric counts all).
DRAWN_SCORE = 0.3
# A detector's classes in its pictures (0-based): the one palette, Okabe-Ito's, as the pages draw
# them (static/workbench/palette.js). A copy, as these PNGs are drawn here, in the engine's child
# without Django or a browser; tests/workbench/inference/test_box_colours.py holds it equal to the
# JS module's list. Each box is edged in black and its label written on its colour (_draw_boxes).
BOX_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#999999")
# Small stored images are drawn larger, so a box and its label can be seen.
PICTURE_SIDE = 192
# Room around a label's text on its chip, in the picture's pixels.
LABEL_PAD = 1


def test_split(
    predictor,
    images_db,
    targets_db,
    out: Path,
    names: list[str] | None = None,
    *,
    progress: Progress | None = None,
) -> dict:
    """The test result of the predictor's task over a split (images and their boxes or masks);
    `names`, the images' source names in key order, name the worst images (else their numbers).
    The databases are paths, or opened ones (a dataset version's split, trainer.versions)."""
    images_db, targets_db = (db if hasattr(db, "raw") else DatumLMDB(db) for db in (images_db, targets_db))
    if isinstance(predictor, Detector):
        dataset = DetectionDataset(images_db, targets_db, transform=None)
        test = _test_detector
    elif isinstance(predictor, Segmenter):
        dataset = SegmentationDataset(images_db, targets_db, transform=None)
        test = _test_segmenter
    else:
        raise InferenceInputError("this split holds boxes or masks; the run's model is a classifier")
    try:
        if not len(dataset):
            raise InferenceInputError("the split is empty")
        result = test(predictor, dataset, out, progress)
        if names is not None and len(names) == len(dataset):
            for item in result["worst"]:
                item["name"] = names[item["index"]]
        return result
    finally:
        dataset.close()  # one LMDB environment per path and process: never leave it open


def _batches(dataset, progress: Progress | None):
    total = len(dataset)
    for start in range(0, total, BATCH):
        indexes = range(start, min(total, start + BATCH))
        items = [dataset[i] for i in indexes]
        yield indexes, torch.stack([image for image, _ in items]), [target for _, target in items]
        if progress:
            progress(indexes[-1] + 1, total)


# ----------------------------------------------------------------------------- detection


def _mean_ap(**kwargs):
    from torchmetrics.detection import MeanAveragePrecision  # a second of import: detection tests only

    return MeanAveragePrecision(box_format="xyxy", iou_type="bbox", backend="faster_coco_eval", **kwargs)


@torch.no_grad()
def _detections(detector: Detector, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    found = detector.model(list(as_rgb(detector.normalize(x.to(detector.device)))))
    return [{"boxes": p["boxes"].float().cpu(), "scores": p["scores"].float().cpu(), "labels": p["labels"].cpu()}
            for p in found]  # fmt: skip


def _truth(target: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Stored classes are 0-based, the detectors' 1-based (0 is their background); ignore regions
    # are COCO crowd regions: neither a miss nor a false positive.
    return {"boxes": target["boxes"], "labels": target["labels"] + 1, "iscrowd": target["ignore"].long()}


def _test_detector(detector: Detector, dataset: DetectionDataset, out: Path, progress) -> dict[str, Any]:
    labels = detector.labels
    overall = _mean_ap(class_metrics=True, extended_summary=True)
    one = _mean_ap(iou_thresholds=[0.5])
    image_ap: list[float | None] = []
    instances = [0] * len(labels)
    drawn = 0  # boxes scored DRAWN_SCORE or more: what the worst images show
    for _, x, targets in _batches(dataset, progress):
        predictions, truths = _detections(detector, x), [_truth(t) for t in targets]
        drawn += sum(int((p["scores"] >= DRAWN_SCORE).sum()) for p in predictions)
        overall.update(predictions, truths)
        for prediction, truth, target in zip(predictions, truths, targets, strict=True):
            one.reset()
            one.update([prediction], [truth])
            ap = float(one.compute()["map"])
            image_ap.append(ap if ap >= 0 else None)  # -1: no box to judge this image by
            for label in target["labels"][~target["ignore"]].tolist():
                instances[label] += 1
    found = overall.compute()
    per_class, curves = _per_class_ap(found, labels, instances)
    worst = _worst(image_ap, "ap50")
    for rank, item in enumerate(worst):
        image, target = dataset[item["index"]]
        [prediction] = _detections(detector, image[None])
        _save_pair(_draw_boxes(image, target["boxes"], target["labels"] + 1, None, labels),
                   _draw_boxes(image, *_drawn(prediction), labels), out / "worst" / f"{rank}.png")  # fmt: skip
        item["file"] = f"{rank}.png"
    return {
        "task": "detection",
        "count": len(dataset),
        **{name: max(0.0, float(found[name])) for name in ("map", "map_50", "map_75", "mar_100")},
        "per_class": per_class,
        "pr_curves": curves,
        "worst": worst,
        "skipped": [],
        "notes": _nothing_found_note(found, drawn=drawn, instances=sum(instances)),
    }


def _nothing_found_note(found: dict, *, drawn: int, instances: int) -> list[str]:
    """A detector's words for a test where it found nothing (every measure 0), as a segmenter's
    test says it predicts one class everywhere: the numbers alone read as a small score."""
    if not instances or float(found["map_50"]) > 0:
        return []
    if not drawn:
        why = f"no box scored {DRAWN_SCORE} or more on these images"
        return [f"{why}: the detector has not learned to find anything yet"]
    why = f"none of its {drawn} boxes scored {DRAWN_SCORE} or more matches an object"
    return [f"{why}: the detector has not learned these classes yet"]


def _per_class_ap(found: dict, labels: list[str], instances: list[int]) -> tuple[list[dict], list[dict]]:
    """Each class's AP@[.5:.95], AP50, AR@100 and instances, and its precision-recall curve at IoU
    0.5 (COCO's 101 recall points; a point the detector never reaches has precision -1: cut)."""
    recall = np.linspace(0, 1, 101)
    classes = [int(c) for c in found["classes"].reshape(-1).tolist()]
    ap = found["map_per_class"].reshape(-1).tolist()
    ar = found["mar_100_per_class"].reshape(-1).tolist()
    precision = found["precision"]  # IoU thresholds x recall points x classes x areas x max detections
    rows, curves = [], []
    for k, class_id in enumerate(classes):
        if not 1 <= class_id <= len(labels):
            continue
        label = labels[class_id - 1]
        points = precision[0, :, k, 0, -1].numpy()
        reached = points >= 0
        rows.append(
            {
                "label": label,
                "instances": instances[class_id - 1],
                "ap": ap[k] if ap[k] >= 0 else None,
                "ap50": float(points[reached].mean()) if instances[class_id - 1] and reached.any() else None,
                "ar100": ar[k] if ar[k] >= 0 else None,
            }
        )
        if instances[class_id - 1]:
            curves.append({"label": label, "recall": recall[reached].round(2).tolist(),
                           "precision": points[reached].round(4).tolist()})  # fmt: skip
    return rows, curves


def _drawn(prediction: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    keep = prediction["scores"] >= DRAWN_SCORE
    return prediction["boxes"][keep], prediction["labels"][keep], prediction["scores"][keep]


def _picture(chw: torch.Tensor) -> tuple[Image.Image, float]:
    array = chw.numpy()
    image = Image.fromarray(array[0] if array.shape[0] == 1 else array.transpose(1, 2, 0)).convert("RGB")
    scale = max(1.0, PICTURE_SIDE / max(image.size))
    return image.resize((round(image.size[0] * scale), round(image.size[1] * scale)), Image.NEAREST), scale


def _draw_boxes(chw, boxes, class_ids, scores, labels: list[str]) -> Image.Image:
    """Boxes as the detect page draws them: each line edged in black, then the labels over every
    box, in black or white on a chip of the class's colour, above the box or just inside it, never
    past the picture's edges."""
    image, scale = _picture(chw)
    pen = ImageDraw.Draw(image)
    drawn = [
        (tuple(v * scale for v in box), class_id)
        for box, class_id in zip(boxes.tolist(), class_ids.tolist(), strict=True)
    ]
    for (x1, y1, x2, y2), class_id in drawn:
        # The coloured line inside a black one a pixel wider each side: seen on white and on black.
        pen.rectangle((x1 - 1, y1 - 1, x2 + 1, y2 + 1), outline="#000", width=4)
        pen.rectangle((x1, y1, x2, y2), outline=BOX_COLOURS[(class_id - 1) % len(BOX_COLOURS)], width=2)
    for i, ((x1, y1, _, _), class_id) in enumerate(drawn):
        colour = BOX_COLOURS[(class_id - 1) % len(BOX_COLOURS)]
        text = labels[class_id - 1] + ("" if scores is None else f" {float(scores[i]):.2f}")
        left, top, right, bottom = pen.textbbox((0, 0), text)
        width, height = right - left + 2 * LABEL_PAD, bottom - top + 2 * LABEL_PAD
        x = max(0, min(x1, image.size[0] - width))
        y = max(0, min(y1 - height if y1 >= height else y1, image.size[1] - height))
        pen.rectangle((x, y, x + width - 1, y + height - 1), fill=colour)
        pen.text((x + LABEL_PAD - left, y + LABEL_PAD - top), text, fill=_ink_on(colour))
    return image


def _ink_on(colour: str) -> str:
    """Black or white, whichever has the more contrast on `colour` ("#rrggbb"), as
    static/workbench/palette.js's inkOn chooses a label's text."""
    light = _luminance(colour)
    return "#ffffff" if 1.05 / (light + 0.05) > (light + 0.05) / 0.05 else "#000000"


def _luminance(colour: str) -> float:
    """WCAG's relative luminance of a "#rrggbb" colour."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    red, green, blue = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _save_pair(truth: Image.Image, predicted: Image.Image, path: Path) -> None:
    """Ground truth on the left, the prediction on the right, a white gap between."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pair = Image.new("RGB", (truth.size[0] * 2 + 8, truth.size[1]), (255, 255, 255))
    pair.paste(truth, (0, 0))
    pair.paste(predicted, (truth.size[0] + 8, 0))
    pair.save(path)


def _worst(scores: list[float | None], name: str) -> list[dict[str, Any]]:
    """The images with the lowest score first (images it says nothing about left out)."""
    judged = sorted((score, index) for index, score in enumerate(scores) if score is not None)
    return [{"index": index, "name": f"#{index}", name: score} for score, index in judged[:MAX_MISTAKES]]


# ----------------------------------------------------------------------------- segmentation


@torch.no_grad()
def _classes(segmenter: Segmenter, x: torch.Tensor) -> torch.Tensor:
    return segmenter.model(segmenter.normalize(x.to(segmenter.device)))["out"].argmax(1).cpu()


def _test_segmenter(segmenter: Segmenter, dataset: SegmentationDataset, out: Path, progress) -> dict[str, Any]:
    labels = segmenter.labels
    count = len(labels)
    confusion = ConfusionMatrix(count, torch.device("cpu"))
    image_iou: list[float | None] = []
    for _, x, masks in _batches(dataset, progress):
        predicted = _classes(segmenter, x)
        for prediction, mask in zip(predicted, masks, strict=True):
            one = ConfusionMatrix(count, torch.device("cpu"))
            one.matrix += pixel_pairs(prediction, mask.long(), count)
            confusion.matrix += one.matrix
            ious = [value for value in one.per_class()["iou"] if value is not None]
            image_iou.append(sum(ious) / len(ious) if ious else None)
    summary = confusion.compute(world=1)
    classes = confusion.per_class()
    matrix = confusion.matrix
    per_class = [
        {
            "label": label,
            "pixels": int(matrix[i].sum()),
            "iou": classes["iou"][i],
            "dice": classes["dice"][i],
            "accuracy": float(matrix[i, i] / matrix[i].sum()) if matrix[i].sum() else None,
        }
        for i, label in enumerate(labels)
    ]
    palette = class_palette()
    worst = _worst(image_iou, "miou")
    for rank, item in enumerate(worst):
        image, mask = dataset[item["index"]]
        [prediction] = _classes(segmenter, image[None])
        _save_pair(_overlay(image, mask.numpy(), palette), _overlay(image, prediction.numpy(), palette),
                   out / "worst" / f"{rank}.png")  # fmt: skip
        item["file"] = f"{rank}.png"
    legend = [{"label": label, "color": "#" + bytes(palette[i]).hex()} for i, label in enumerate(labels)]
    return {
        "task": "segmentation",
        "count": len(dataset),
        "miou": summary["miou"],
        "pixel_accuracy": summary["pixel_accuracy"],
        "dice": summary["dice"],
        "per_class": per_class,
        "legend": legend,
        "worst": worst,
        "skipped": [],
        "notes": _one_class_note(matrix, labels),
    }


def _one_class_note(matrix: torch.Tensor, labels: list[str]) -> list[str]:
    """The run page's words for a network that predicts one class everywhere, for this split."""
    predicted = matrix.sum(0)
    if int((predicted > 0).sum()) != 1:
        return []
    only = labels[int(predicted.argmax())]
    return [f"every pixel is predicted as {only}: the network has not separated any class yet"]


def _overlay(chw: torch.Tensor, mask: np.ndarray, palette: np.ndarray) -> Image.Image:
    """The image with its classes' colours blended in at half strength (ignored pixels as they are)."""
    image, _ = _picture(chw)
    colours = Image.fromarray(palette[mask]).resize(image.size, Image.NEAREST)
    blended = Image.blend(image, colours, 0.55)
    ignored = Image.fromarray(((mask == 255) * 255).astype(np.uint8)).resize(image.size, Image.NEAREST)
    blended.paste(image, mask=ignored)
    return blended
