"""Inference on a trained checkpoint, without Django: classify images, test on labelled images,
look inside the network (activations.py); a detector's or segmentation network's many-images
jobs and tests run through here too (`render_folder` with renderers.py's renderers, evaluation.py;
job.py picks one per job).
The web process calls the small, fast functions directly (one image); background jobs run
`python -m workbench.inference.job SPEC.json` (job.py) in a child process, so a job's heavy work
never runs inside a worker thread.

A job speaks the trainer's child-process protocol (trainer/protocol.py): JSON-lines events on
stdout, a `progress` event per batch (`done`, `total` beside `percent`, `eta_seconds`, `elapsed`)
and a last `status` event with state `done` | `failed`, the message and `exit_code`; then it exits
with that code (EXIT_CONFIG when the input cannot be used, EXIT_FAILED for any other error).
Files in the spec's `out` folder: `result.json` holds the result payload (one row per image for
many-images jobs, so too large for an event), beside `results.csv` (classify, detect, segment:
with `masks/`) or the `mistakes/` gallery (a classifier's test; a detector's or segmentation
network's: `worst/`).

Every image goes through the trainer's own preprocessing (`trainer.preprocess`, then the task's predictor), and
split images through the validation data path of training (`LMDBImageDataset`, centre crop), so
what is measured here is what training measured.
"""

from __future__ import annotations

import base64
import csv
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from trainer.preprocess import image_to_uint8
from workbench.core.task_table import task_row

BATCH = 64
MAX_MISTAKES = 24
TOP_PER_CLASS = 8  # images per class in "Top N per category"
MAX_TOP_CLASSES = 100  # a gallery row per class; more would be a page nobody scrolls
MAX_THUMBNAILS = 5000  # classify-many: the rows the job page's table shows, each with its image
THUMBNAIL_SIDE = 64
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm")

Progress = Callable[[int, int], None]


class InferenceInputError(ValueError):
    """The input cannot be used (no images, an unknown label...); the message says which and why,
    `field` names the request field when it is about one (this module runs without Django, so
    the web side turns it into a RequestError: workbench.inference.services.input_error)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


# ----------------------------------------------------------------------------- loading


_CACHE: dict[tuple[str, float], Any] = {}


def load_predictor(checkpoint: str | os.PathLike[str]):
    """The predictor of a checkpoint's task (a Classifier, Detector or Segmenter), cached per
    (path, mtime) so repeated single-image requests do not reload the weights; at most two
    models stay in memory."""
    # the engine runs as a child process; the web process that imports this module for its helpers never loads torch
    from trainer.inference import load_checkpoint_predictor  # torch: loaded only where this runs

    path = str(checkpoint)
    key = (os.path.realpath(path), os.stat(path).st_mtime)
    if key not in _CACHE:
        while len(_CACHE) >= 2:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = load_checkpoint_predictor(path)
    return _CACHE[key]


def load_classifier(checkpoint: str | os.PathLike[str]):
    """A Classifier for a checkpoint file; InferenceInputError for another task's checkpoint."""
    return predictor_of(checkpoint, "classify")


def predictor_of(checkpoint: str | os.PathLike[str], action: str):
    """The checkpoint's predictor if its task does `action` (the task table's row); else the
    refusal names the one it does."""
    predictor = load_predictor(checkpoint)
    does = task_row(predictor.task).action
    if does != action:
        kind = type(predictor).__name__.lower()
        raise InferenceInputError(f"this run's model does not {action}: it is a {kind}; use {does}")
    return predictor


def open_image(source: str | os.PathLike[str] | bytes) -> Image.Image:
    """Decode one image by its content (Pillow's bomb limits on); ImageRefused names the problem."""
    # the engine runs as a child process; the web process that imports this module for its helpers never loads torch
    from datasets.images import load_image  # torch: loaded only where this runs

    return load_image(source)


def png_data_url(array_hwc_or_hw: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(array_hwc_or_hw).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def as_seen(classifier, image: Image.Image) -> np.ndarray:
    """The image as the network saw it (resized, cropped; before mean subtraction), H x W (x C)."""
    chw = image_to_uint8(image, classifier.preprocessing)
    return chw[0] if chw.shape[0] == 1 else chw.transpose(1, 2, 0)


# ----------------------------------------------------------------------------- one image


def classify_one(classifier, image: Image.Image, top_k: int = 5) -> list[dict[str, Any]]:
    [top] = classifier.classify([image], top_k=top_k)
    return [{"label": label, "probability": probability} for label, probability in top]


# ----------------------------------------------------------------------------- many images


def image_files(folder: Path) -> list[Path]:
    """Every regular file under `folder`, sorted; non-images are reported when decoded."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def _batches(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _decode(paths: list[Path], root: Path) -> tuple[list[tuple[str, Image.Image]], list[dict[str, str]]]:
    # the engine runs as a child process; the web process that imports this module for its helpers never loads torch
    from datasets.images import ImageRefused  # torch: loaded only where this runs

    good, skipped = [], []
    for path in paths:
        name = path.relative_to(root).as_posix()
        try:
            good.append((name, open_image(path)))
        except ImageRefused as error:
            skipped.append({"path": name, "reason": str(error)})
    return good, skipped


Render = Callable[[list[tuple[str, Image.Image]]], list[dict[str, Any]]]


def render_folder(
    root: Path,
    out: Path,
    render: Render,
    header: list[str],
    csv_lines: Callable[[dict[str, Any]], list[list[Any]]],
    *,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The one runner of many-images jobs: every image under `root`, decoded in batches (files
    that are not images skipped with the reason), `render` turns a batch of (name, image) into
    rows, `results.csv` gets `header` and each row's `csv_lines`; the summary with the rows."""
    files = image_files(root)
    if not files:
        raise InferenceInputError("no files found in the upload")
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for done, chunk in enumerate(_batches(files, BATCH)):
        images, refused = _decode(chunk, root)
        skipped += refused
        if images:
            rows += render(images)
        if progress:
            progress(min(len(files), (done + 1) * BATCH), len(files))
    if not rows:
        raise InferenceInputError(f"none of the {len(files)} files is an image (first: {skipped[0]['reason']})")
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerows(csv_lines(row))
    return {"count": len(rows), "skipped": skipped, "rows": rows}


def classify_folder(
    classifier, root: Path, out: Path, *, top_k: int = 5, progress: Progress | None = None
) -> dict[str, Any]:
    """Classify every image under `root`; writes `results.csv` and a thumbnail of each image (the
    first MAX_THUMBNAILS, as many as the page's table shows) in `thumbs/`; returns the summary + rows."""
    k = min(top_k, len(classifier.labels))
    folder = out / "thumbs"
    folder.mkdir(parents=True, exist_ok=True)
    numbered = iter(range(1 << 62))

    def render(images: list[tuple[str, Image.Image]]) -> list[dict[str, Any]]:
        tops = classifier.classify([image for _, image in images], top_k=k)
        rows = []
        for (name, image), top in zip(images, tops, strict=True):
            row = {"path": name, "top": [{"label": label, "probability": p} for label, p in top]}
            number = next(numbered)
            if number < MAX_THUMBNAILS:
                save_thumbnail(image, folder / f"{number}.png")
                row["thumb"] = f"{number}.png"
            rows.append(row)
        return rows

    def csv_lines(row: dict[str, Any]) -> list[list[Any]]:
        return [[row["path"]] + [v for t in row["top"] for v in (t["label"], f"{t['probability']:.6f}")]]

    header = ["path"] + [c for i in range(1, k + 1) for c in (f"label_{i}", f"probability_{i}")]
    return {**render_folder(root, out, render, header, csv_lines, progress=progress), "top_k": k}


# ----------------------------------------------------------------------------- testing


def labelled_files(root: Path, labels: list[str]) -> list[tuple[Path, int]]:
    """Labelled images in an upload: a list file (`path label` lines, label = index or class
    name, paths relative to the list) or class folders named after the run's labels."""
    index = {name: i for i, name in enumerate(labels)}
    lists = sorted(p for p in root.rglob("*.txt") if p.is_file() and not p.name.startswith("."))
    lists = [p for p in lists if p.name != "labels.txt"]
    if lists:
        items = []
        for number, line in enumerate(lists[0].read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            path_text, _, label_text = line.strip().rpartition(" ")
            if not path_text:
                raise InferenceInputError(f"{lists[0].name} line {number}: expected 'path label', got {line!r}")
            label_text = label_text.strip()
            if label_text in index:
                label = index[label_text]
            elif label_text.lstrip("-").isdigit() and 0 <= int(label_text) < len(labels):
                label = int(label_text)
            else:
                raise InferenceInputError(
                    f"{lists[0].name} line {number}: label {label_text!r} is not a class of this run "
                    f"(0..{len(labels) - 1} or one of {', '.join(labels[:10])})"
                )
            path = (lists[0].parent / path_text.strip()).resolve()
            if not path.is_relative_to(root.resolve()):
                raise InferenceInputError(f"{lists[0].name} line {number}: {path_text!r} is outside the upload")
            items.append((path, label))
        if not items:
            raise InferenceInputError(f"{lists[0].name}: no 'path label' lines")
        return items
    items = []
    for path in image_files(root):
        parts = path.relative_to(root).parts
        folder = next((part for part in reversed(parts[:-1]) if part in index), None)
        if folder is None:
            raise InferenceInputError(
                f"{path.relative_to(root).as_posix()}: its folder is not a class of this run "
                f"({', '.join(labels[:10])}); use class folders or a list file"
            )
        items.append((path, index[folder]))
    if not items:
        raise InferenceInputError("no images found in the upload")
    return items


def predict_split(
    classifier, db_path: str | os.PathLike[str], *, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, probabilities N x C, the uint8 images as seen) over a dataset split, through the
    validation data path of training."""
    # the engine runs as a child process; the web process that imports this module for its helpers never loads torch
    import torch  # torch: loaded only where this runs

    from trainer.data import LMDBImageDataset  # torch: loaded only where this runs
    from trainer.datum import DatumLMDB  # torch: loaded only where this runs

    # A path, or an opened database (a dataset version's split, trainer.versions).
    db = db_path if hasattr(db_path, "raw") else DatumLMDB(db_path)
    try:
        dataset = LMDBImageDataset(db, crop_size=classifier.preprocessing.get("crop"))
        total = len(dataset)
        ys, probs, seen = [], [], []
        for start in range(0, total, BATCH):
            batch = [dataset[i] for i in range(start, min(total, start + BATCH))]
            images = torch.stack([image for image, _ in batch])
            with torch.no_grad():
                logits = classifier.model(classifier.normalize(images.to(classifier.device)))
            probs.append(torch.softmax(logits.float(), dim=1).cpu().numpy())
            ys += [label for _, label in batch]
            seen.append(images.numpy())
            if progress:
                progress(min(total, start + BATCH), total)
    finally:
        db.close()  # one LMDB environment per path and process: never leave it open
    if not ys:
        raise InferenceInputError(f"{db_path}: the split is empty")
    return np.asarray(ys), np.concatenate(probs), np.concatenate(seen)


def predict_files(
    classifier, items: list[tuple[Path, int]], root: Path, *, progress: Progress | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    ys, probs, seen, skipped = [], [], [], []
    label_of = {path: label for path, label in items}
    paths = [path for path, _ in items]
    for done, chunk in enumerate(_batches(paths, BATCH)):
        images, refused = _decode(chunk, root)
        skipped += refused
        if images:
            pil = [image for _, image in images]
            probs.append(classifier.probabilities(pil).numpy())
            seen.append(np.stack([image_to_uint8(image, classifier.preprocessing) for image in pil]))
            ys += [label_of[root / name] for name, _ in images]
        if progress:
            progress(min(len(paths), (done + 1) * BATCH), len(paths))
    if not ys:
        raise InferenceInputError("none of the listed files is an image")
    return np.asarray(ys), np.concatenate(probs), np.concatenate(seen), skipped


def test_metrics(y_true: np.ndarray, probs: np.ndarray, labels: list[str]) -> dict[str, Any]:
    """Top-1 / top-5 accuracy, per-class precision / recall / F1, the confusion matrix (rows =
    true class, columns = predicted)."""
    classes = len(labels)
    pred = probs.argmax(axis=1)
    k = min(5, classes)
    topk = np.argsort(-probs, axis=1)[:, :k]
    confusion = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(confusion, (y_true, pred), 1)
    per_class = []
    for c in range(classes):
        tp = int(confusion[c, c])
        predicted, actual = int(confusion[:, c].sum()), int(confusion[c, :].sum())
        precision = tp / predicted if predicted else None
        recall = tp / actual if actual else None
        f1 = (
            2 * precision * recall / (precision + recall)
            if precision is not None and recall is not None and precision + recall
            else (0.0 if precision is not None and recall is not None else None)
        )
        per_class.append(
            {
                "label": labels[c],
                "support": actual,
                "predicted": predicted,
                "precision": precision,
                "recall": recall,
                "f1": f1,
            }
        )
    return {
        "count": int(len(y_true)),
        "top1": float((pred == y_true).mean()),
        "top5": float((topk == y_true[:, None]).any(axis=1).mean()),
        "top_k": k,
        "per_class": per_class,
        "confusion": confusion.tolist(),
        "labels": list(labels),
    }


def save_thumbnail(image: Image.Image, path: Path) -> None:
    """The image as uploaded, at most THUMBNAIL_SIDE on its longer side, as a PNG."""
    thumb = image.copy()
    if thumb.mode not in ("1", "L", "LA", "RGB", "RGBA", "P"):
        thumb = thumb.convert("RGB")  # CMYK, 16-bit: what PNG and browsers show alike
    thumb.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    thumb.save(path)


def save_seen_image(chw: np.ndarray, path: Path) -> None:
    """A C x H x W uint8 image, as the net saw it, as a PNG (grey or colour)."""
    Image.fromarray(chw[0] if chw.shape[0] == 1 else chw.transpose(1, 2, 0)).save(path)


def save_mistakes(
    y_true: np.ndarray,
    probs: np.ndarray,
    seen_chw: np.ndarray,
    labels: list[str],
    out: Path,
    names: list[str] | None = None,
    limit: int = MAX_MISTAKES,
) -> list[dict[str, Any]]:
    """The most confident wrong predictions, each saved as a PNG of the image as the net saw it."""
    pred = probs.argmax(axis=1)
    wrong = np.flatnonzero(pred != y_true)
    order = wrong[np.argsort(-probs[wrong, pred[wrong]], kind="stable")][:limit]
    folder = out / "mistakes"
    folder.mkdir(parents=True, exist_ok=True)
    mistakes = []
    for rank, i in enumerate(order):
        save_seen_image(seen_chw[i], folder / f"{rank}.png")
        mistakes.append(
            {
                "file": f"{rank}.png",
                "index": int(i),
                "name": names[i] if names else f"#{int(i)}",
                "true": labels[int(y_true[i])],
                "predicted": labels[int(pred[i])],
                "confidence": float(probs[i, pred[i]]),
                "true_probability": float(probs[i, y_true[i]]),
            }
        )
    return mistakes


def save_top_per_class(
    y_true: np.ndarray,
    probs: np.ndarray,
    seen_chw: np.ndarray,
    labels: list[str],
    out: Path,
    names: list[str] | None = None,
    n: int = TOP_PER_CLASS,
) -> list[dict[str, Any]]:
    """DIGITS's "Top N per category": for each class (the first MAX_TOP_CLASSES), the n images
    the model gives the highest probability of that class, as PNGs of the images as it saw them,
    each with its true class (a confident wrong one stands out)."""
    folder = out / "top"
    folder.mkdir(parents=True, exist_ok=True)
    classes = []
    for c in range(min(len(labels), MAX_TOP_CLASSES)):
        order = np.argsort(-probs[:, c], kind="stable")[:n]
        images = []
        for rank, i in enumerate(order):
            save_seen_image(seen_chw[i], folder / f"{c}_{rank}.png")
            images.append(
                {
                    "file": f"{c}_{rank}.png",
                    "name": names[i] if names else f"#{int(i)}",
                    "true": labels[int(y_true[i])],
                    "probability": float(probs[i, c]),
                }
            )
        classes.append({"label": labels[c], "images": images})
    return classes
