"""One background inference job, in its own process: `python -m workbench.inference.job SPEC.json`
(services.py starts it). It picks the job's runner (engine.py's for a classifier; renderers.py's
and evaluation.py's for a detector or a segmentation network), speaks the trainer's child-process
protocol (engine.py's docstring says which events and files) and exits with the outcome's code."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from datasets.images import ImageLimits, set_image_limits
from trainer.events import Events, JsonLinesReporter
from trainer.protocol import EXIT_CONFIG, EXIT_FAILED, STATUS, Outcome
from workbench.inference import evaluation, renderers
from workbench.inference.engine import (
    InferenceInputError,
    Progress,
    classify_folder,
    labelled_files,
    load_classifier,
    load_predictor,
    predict_files,
    predict_split,
    predictor_of,
    save_mistakes,
    save_top_per_class,
    test_metrics,
)


def split_names(spec: dict[str, Any]) -> list[str] | None:
    """The split's images' source names in key order (`<split>_names.json`), or None where the
    build did not know them (imported LMDBs) or the file is not a list of names."""
    if not spec.get("split_names"):
        return None
    try:
        names = json.loads(Path(spec["split_names"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return names if isinstance(names, list) and all(isinstance(n, str) for n in names) else None


def split_sources(spec: dict[str, Any]) -> tuple[Any, Any]:
    """The split's images and targets: LMDB paths, or for a dataset version's split its
    databases opened through the version's overlay (trainer/versions.py)."""
    if not spec.get("version_folder"):
        return spec.get("split_db"), spec.get("targets_db")
    from trainer.dataset_folder import load_dataset_folder  # only a version's split needs it
    from trainer.versions import open_images, open_targets  # only a version's split needs it

    split = load_dataset_folder(spec["version_folder"]).splits[spec["split"]]
    return open_images(split), open_targets(split) if split.targets_db is not None else None


def run_job(spec: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """One background job. spec: {kind: classify|detect|segment|test, checkpoint, out, input
    (folder) | split_db (+ targets_db for a detector's or segmentation network's split)}."""
    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    if spec["kind"] in ("detect", "segment") or spec.get("targets_db"):
        if spec["kind"] == "detect":
            detector = predictor_of(spec["checkpoint"], "detect")
            return renderers.detect_folder(detector, Path(spec["input"]), out, progress=progress)
        if spec["kind"] == "segment":
            segmenter = predictor_of(spec["checkpoint"], "segment")
            return renderers.segment_folder(segmenter, Path(spec["input"]), out, progress=progress)
        predictor = load_predictor(spec["checkpoint"])
        names = split_names(spec)
        images, targets = split_sources(spec)
        return evaluation.test_split(predictor, images, targets, out, names, progress=progress)
    classifier = load_classifier(spec["checkpoint"])
    if spec["kind"] == "classify":
        return classify_folder(classifier, Path(spec["input"]), out, progress=progress)
    labels = classifier.labels
    if spec.get("split_db"):
        y, probs, seen = predict_split(classifier, split_sources(spec)[0], progress=progress)
        names, skipped = split_names(spec), []
        names = names if names is not None and len(names) == len(y) else None
    else:
        root = Path(spec["input"])
        items = labelled_files(root, labels)
        y, probs, seen, skipped = predict_files(classifier, items, root, progress=progress)
        decoded = {p for p, _ in items} - {root / s["path"] for s in skipped}
        names = [p.relative_to(root).as_posix() for p, _ in items if p in decoded]
    result = test_metrics(y, probs, labels)
    result["mistakes"] = save_mistakes(y, probs, seen, labels, out, names)
    result["top_per_class"] = save_top_per_class(y, probs, seen, labels, out, names)
    result["skipped"] = skipped
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    if "image_limits" in spec:  # the web side's limits (settings); without them, datasets.images' defaults
        set_image_limits(ImageLimits(**spec["image_limits"]))
    out = Path(spec["out"])
    # The events go to the file the worker follows (argv[1]), or to stdout when run by hand.
    events = Events(JsonLinesReporter(argv[1] if len(argv) > 1 else sys.stdout))
    started = last = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 0.3 or done == total:
            last, elapsed = now, now - started
            eta = elapsed / done * (total - done) if done else None
            events.progress(100.0 * done / max(1, total), eta, elapsed, done=done, total=total)

    try:
        result = run_job(spec, progress)
        (out / "result.json").write_text(json.dumps(result), encoding="utf-8")
        outcome = Outcome.done(f"{result.get('count', 0)} images")
    except Exception as error:  # reported to the user as the job's error
        message = (
            str(error)
            if isinstance(error, InferenceInputError | ValueError | OSError)
            else (f"{type(error).__name__}: {error}")
        )
        outcome = Outcome.failed(EXIT_CONFIG if isinstance(error, InferenceInputError) else EXIT_FAILED, message)
    events.emit(STATUS, **outcome.status_fields())
    return outcome.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
