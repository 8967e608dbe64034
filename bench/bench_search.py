"""A search's early stopping against today's sweep: on scikit-learn's 1,797 real 8x8 digits, with
LeNet on the CPU, the same space (lr from 1e-4 to 1, batch size 16 or 64) searched three ways:

- grid: today's sweep, 8 learning rates x 2 batch sizes, every run to the end;
- random: 16 trials drawn at random, every one to the end (no pruning);
- ours: the search's TPE sampler and ASHA pruner (workbench/searches/studies.py's own
  `sampler_for` and `pruner_for`), trials reporting the val loss at each epoch, the pruned ones
  stopped at once, until the grid's budget in trained epochs is spent.

Every trial is a real training run of the workbench's trainer (trainer.run.train, in this
process). Prints each way's best val loss and the epochs it had trained when it first reached the
grid's best (within 1 %; goal: the search in <= 1/3 of the grid's epochs), and their ratio.

    .venv/bin/python bench/bench_search.py [--epochs 6] [--seeds 3]

Run it on a quiet machine: each trial uses every core.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LRS = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
BATCHES = (16, 64)


@dataclass
class Trace:
    """What one way of searching spent and found: (epochs trained so far, best so far) after each trial."""

    name: str
    points: list[tuple[float, float]]

    @property
    def best(self) -> float:
        return min((best for _, best in self.points), default=math.inf)

    @property
    def epochs(self) -> float:
        return self.points[-1][0] if self.points else 0.0

    def epochs_to_reach(self, target: float) -> float | None:
        return next((epochs for epochs, best in self.points if best <= target + 1e-9), None)


class PruningReporter:
    """The trainer's reporter for one trial: each validation is reported to Optuna at its epoch
    (the rung, as trial_report does for a search's run) and a pruned trial is asked to stop."""

    def __init__(self, trial, stop) -> None:
        self.trial, self.stop = trial, stop
        self.values: list[tuple[float, float]] = []  # (epoch, val loss)

    def emit(self, event: dict) -> None:
        if event.get("type") != "validation" or event.get("val_loss") is None:
            return
        epoch, value = float(event["epoch"]), float(event["val_loss"])
        self.values.append((epoch, value))
        if self.trial is None:
            return
        self.trial.report(value, max(1, round(epoch)))
        if self.trial.should_prune():
            self.stop.request("prune")


def train_trial(folder: Path, root: Path, *, lr: float, batch: int, epochs: int, trial=None) -> tuple[float, float]:
    """Trains one trial; returns (epochs trained, best val loss)."""
    from trainer.config import config_from_dict
    from trainer.run import train
    from trainer.stopping import StopFlag

    run_dir = Path(tempfile.mkdtemp(dir=root))
    cfg = config_from_dict(
        {
            "run_dir": str(run_dir),
            "network": "lenet",
            "epochs": epochs,
            "batch_size": batch,
            "devices": ["cpu"],
            "seed": 0,
            "val_interval": 1,
            "data": {"dataset": str(folder), "num_workers": 0},
            "solver": {"optimizer": "sgd", "base_lr": lr, "momentum": 0.9, "lr_policy": "fixed"},
        }
    )
    stop = StopFlag()
    reporter = PruningReporter(trial, stop)
    train(cfg, reporter=reporter, stop=stop)
    shutil.rmtree(run_dir, ignore_errors=True)
    if not reporter.values:
        return 0.0, math.inf
    losses = [value for _, value in reporter.values if math.isfinite(value)]
    return reporter.values[-1][0], min(losses, default=math.inf)


def grid(folder: Path, root: Path, epochs: int) -> Trace:
    points, spent, best = [], 0.0, math.inf
    for lr in LRS:
        for batch in BATCHES:
            trained, value = train_trial(folder, root, lr=lr, batch=batch, epochs=epochs)
            spent, best = spent + trained, min(best, value)
            points.append((spent, best))
    return Trace("grid (today's sweep)", points)


def searched(folder: Path, root: Path, epochs: int, *, budget: float, seed: int, pruned: bool) -> Trace:
    import optuna

    from workbench.searches.models import Search
    from workbench.searches.studies import pruner_for, sampler_for

    search = Search(sampler="tpe" if pruned else "random", pruner="asha" if pruned else "none", seed=seed)
    search.base_request = {"config": {"epochs": epochs}}
    study = optuna.create_study(direction="minimize", sampler=sampler_for(search), pruner=pruner_for(search))
    space = {
        "lr": optuna.distributions.FloatDistribution(min(LRS), 1.0, log=True),
        "batch_size": optuna.distributions.CategoricalDistribution(list(BATCHES)),
    }
    points, spent, best = [], 0.0, math.inf
    trials = 0
    while spent < budget and (pruned or trials < len(LRS) * len(BATCHES)):
        trial = study.ask(space)
        trained, value = train_trial(
            folder, root, lr=trial.params["lr"], batch=trial.params["batch_size"], epochs=epochs, trial=trial
        )
        state = optuna.trial.TrialState.PRUNED if trained < epochs - 1e-6 else optuna.trial.TrialState.COMPLETE
        study.tell(trial, value if state == optuna.trial.TrialState.COMPLETE else None, state=state)
        spent, best, trials = spent + trained, min(best, value), trials + 1
        points.append((spent, best))
    name = "ours: TPE + ASHA" if pruned else "random, no pruning"
    return Trace(name, points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6, help="epochs of a trial trained to the end")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of the random and the searched ways")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-search-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    (root / "data").mkdir()  # settings want a data dir; this bench writes no row in its database
    os.environ.setdefault("WORKBENCH_DATA_DIR", str(root / "data"))
    import django

    django.setup()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from tests.support.trainer_data import make_digits_folder

    try:
        folder = make_digits_folder(root / "digits")
        baseline = grid(folder, root, args.epochs)
        # Reaching the grid's best: within 1 % of its val loss (a continuous lr rarely lands on it exactly).
        target = baseline.best * 1.01
        print(f"digits 8x8, LeNet, {args.epochs} epochs a trial; the grid's best val loss {baseline.best:.4f}")
        print(f"in {baseline.epochs:g} epochs; reached = a val loss <= {target:.4f}\n")
        print("| way | seed | trials | epochs trained | best val loss | epochs to the grid's best | of the grid's |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        found = baseline.epochs_to_reach(target)
        print(f"| {baseline.name} | - | {len(baseline.points)} | {baseline.epochs:g} | {baseline.best:.4f} | "
              f"{found:g} | {found / baseline.epochs:.2f} |")  # fmt: skip
        for pruned in (False, True):
            for seed in range(args.seeds):
                trace = searched(folder, root, args.epochs, budget=baseline.epochs, seed=seed, pruned=pruned)
                reached = trace.epochs_to_reach(target)
                share = f"{reached / baseline.epochs:.2f}" if reached is not None else "not reached"
                print(f"| {trace.name} | {seed} | {len(trace.points)} | {trace.epochs:g} | {trace.best:.4f} | "
                      f"{reached if reached is not None else '-'} | {share} |")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
