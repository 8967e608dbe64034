"""Label errors on scikit-learn's digits: the workbench's own cross-validation and confident
learning (datasets/doctor/confident.py) vs cleanlab's ranking and "lowest confidence first".

The bench flips 5 % of the 1,797 digits' labels at random (N flips, each to another class), deals
the images into K stratified folds as a label check does (workbench/labelchecks/folds.py's
`assign`), and trains one LeNet per fold with the trainer on the other folds through a version
overlay (trainer/versions.py), each writing its held-out probabilities (trainer/heldout.py).
Then, on the same out-of-fold probabilities: precision of the top N suspects and recall of the
top 2N, for ours, cleanlab's `find_label_issues` (ranked by self-confidence, then the rest) and
the baseline that ranks every image by its given label's probability alone.

    .venv/bin/python bench/bench_label_errors.py [--folds 5] [--epochs 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datasets.doctor.confident import find_suspects  # noqa: E402
from tests.support.trainer_data import write_dataset_folder  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.protocol import EXIT_DONE, HELDOUT_FILE  # noqa: E402
from trainer.run import train  # noqa: E402
from trainer.versions import OVERLAY_FILE  # noqa: E402


def deal(labels: np.ndarray, folds: int, seed: int) -> list[list[int]]:
    """Each class shuffled and dealt round the folds (as workbench/labelchecks/folds.py's assign)."""
    rng = np.random.default_rng(seed)
    dealt: list[list[int]] = [[] for _ in range(folds)]
    turn = 0
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        for index in members[rng.permutation(len(members))]:
            dealt[turn % folds].append(int(index))
            turn += 1
    return dealt


def fold_folder(build: Path, fold: int, held: list[int], count: int) -> Path:
    folder = build / "folds" / str(fold)
    folder.mkdir(parents=True)
    meta = json.loads((build / "dataset.json").read_text())
    rest = sorted(set(range(count)) - set(held))
    meta["splits"] = {
        "train": {"db": "../../train_db", "count": len(rest)},
        "val": {"db": "../../train_db", "count": len(held)},
    }
    meta["mean"] = {kind: "../../" + name for kind, name in meta.get("mean", {}).items()}
    meta["overlay"] = OVERLAY_FILE
    splits = {"train": [["train", i] for i in rest], "val": [["train", i] for i in sorted(held)]}
    overlay = {"format_version": 1, "sources": {"train": "../../train_db"}, "splits": splits}
    (folder / "dataset.json").write_text(json.dumps(meta))
    (folder / OVERLAY_FILE).write_text(json.dumps(overlay))
    return folder


def out_of_fold(images: np.ndarray, given: np.ndarray, *, folds: int, epochs: float, seed: int, root: Path):
    build = write_dataset_folder(root / "digits", {"train": (images, given)}, [str(d) for d in range(10)])
    probabilities = np.zeros((len(given), 10), dtype=np.float32)
    for fold, held in enumerate(deal(given, folds, seed)):
        cfg = config_from_dict({
            "run_dir": str(root / f"run-{fold}"), "network": "lenet", "epochs": epochs, "batch_size": 64,
            "data": {"dataset": str(fold_folder(build, fold, held, len(given))), "num_workers": 0},
            "solver": {"optimizer": "sgd", "base_lr": 0.05, "lr_policy": "cosine"}, "val_interval": 0,
            "heldout_predictions": True, "seed": seed,
        })  # fmt: skip
        if train(cfg, reporter=ListReporter()) != EXIT_DONE:
            raise SystemExit(f"fold {fold} did not train")
        probabilities[sorted(held)] = np.load(root / f"run-{fold}" / HELDOUT_FILE)
    return probabilities


def scores(order: np.ndarray, flipped: set[int]) -> tuple[float, float]:
    n = len(flipped)
    return len(set(order[:n].tolist()) & flipped) / n, len(set(order[: 2 * n].tolist()) & flipped) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--epochs", type=float, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.uint8(np.clip(digits.images * 16, 0, 255))[..., None]
    rng = np.random.default_rng(args.seed)
    true = digits.target.astype(np.int64)
    flipped = rng.choice(len(true), round(0.05 * len(true)), replace=False)
    given = true.copy()
    given[flipped] = (true[flipped] + rng.integers(1, 10, len(flipped))) % 10
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as root:
        probabilities = out_of_fold(
            images, given, folds=args.folds, epochs=args.epochs, seed=args.seed, root=Path(root)
        )
    trained = time.perf_counter() - started
    accuracy = float((probabilities.argmax(1) == true).mean())

    started = time.perf_counter()
    ours = find_suspects(given, probabilities)
    ours_seconds = time.perf_counter() - started
    from cleanlab.filter import find_label_issues  # AGPL-3.0: the reference, run by this bench only

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranked = find_label_issues(given, probabilities, return_indices_ranked_by="self_confidence")
    cleanlab_seconds = time.perf_counter() - started
    confidence = probabilities[np.arange(len(given)), given]
    rest = [i for i in np.argsort(confidence, kind="stable") if i not in set(ranked.tolist())]
    theirs = np.concatenate([ranked, np.array(rest, dtype=np.int64)])
    lowest = np.argsort(confidence, kind="stable")
    target = set(flipped.tolist())
    print(f"digits: {len(given)} images, {len(target)} labels flipped (N), {args.folds} folds of LeNet, "
          f"{args.epochs:g} epochs each: {trained:.0f} s; "
          f"out-of-fold accuracy on the true labels {accuracy:.3f}")  # fmt: skip
    print(f"{'ranking':<28} {'suspects':>8} {'precision@N':>12} {'recall@2N':>10} {'seconds':>8}")
    rows = [("ours (confident learning)", ours.order, ours.count, ours_seconds),
            ("cleanlab find_label_issues", theirs, len(ranked), cleanlab_seconds),
            ("lowest confidence first", lowest, None, None)]  # fmt: skip
    for name, order, count, seconds in rows:
        precision, recall = scores(order, target)
        print(f"{name:<28} {count if count is not None else '-':>8} {precision:>12.3f} {recall:>10.3f} "
              f"{seconds if seconds is not None else float('nan'):>8.3f}")  # fmt: skip
    ours_p, ours_r = scores(ours.order, target)
    base_p, _ = scores(lowest, target)
    print(f"ratio ours / cleanlab precision@N: {ours_p / max(scores(theirs, target)[0], 1e-9):.3f}; "
          f"ours / lowest-confidence: {ours_p / max(base_p, 1e-9):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
