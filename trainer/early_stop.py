"""Early stopping: end a run when its validation metric (`best_metric`) has not improved by more
than `early_stopping_min_delta` for `early_stopping_patience` validations in a row. The best
checkpoint is kept as always; the final status says why it ended, where, and which best was kept,
so the run's timeline and its page do.
Its count is saved in every checkpoint, so a run resumed after an interruption keeps counting."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.config import TrainConfig
from trainer.protocol import AVERAGE, METRIC_DIRECTION, WEIGHTS_WORDS, Outcome

# How a message names each metric.
METRIC_WORDS = {
    "top1": "top-1",
    "top5": "top-5",
    "pixel_accuracy": "pixel accuracy",
    "map": "mAP",
    "map_50": "mAP50",
    "map_75": "mAP75",
    "mar_100": "mAR@100",
    "miou": "mIoU",
    "dice": "Dice",
}


@dataclass
class EarlyStopping:
    metric: str
    patience: int
    min_delta: float
    best: float | None = None
    best_epoch: float = 0.0
    stale: int = 0  # validations in a row without enough improvement
    triggered: bool = False
    # The best checkpoint's value and epoch (best.pt: any improvement, by `improves`), which a
    # stopped run names as its one best; `best` above moves only by more than the delta.
    kept: float | None = None
    kept_epoch: float | None = None
    kept_weights: str | None = None  # protocol.checkpoint_weights: "raw" or "ema"

    def update(self, value: float, *, epoch: float, weights: str | None = None) -> None:
        if improves(self.metric, value, self.kept):
            self.kept, self.kept_epoch, self.kept_weights = value, round(epoch, 5), weights
        higher_is_better = METRIC_DIRECTION[self.metric] == "max"
        gain = (value - self.best if higher_is_better else self.best - value) if self.best is not None else None
        if gain is None or gain > self.min_delta:
            self.best, self.best_epoch, self.stale = value, epoch, 0
            return
        self.stale += 1
        self.triggered = self.stale >= self.patience

    def state(self) -> dict:
        """What a checkpoint keeps, so a resumed run goes on counting where it was."""
        return {
            "best": self.best,
            "best_epoch": self.best_epoch,
            "stale": self.stale,
            "kept": self.kept,
            "kept_epoch": self.kept_epoch,
            "kept_weights": self.kept_weights,
        }

    def load(self, state: dict | None) -> None:
        """From a checkpoint's `state()`; a checkpoint written without one (or with early stopping
        off) starts counting afresh."""
        if state:
            self.best, self.best_epoch, self.stale = state["best"], float(state["best_epoch"]), int(state["stale"])
            self.triggered = self.stale >= self.patience
            self.kept, self.kept_epoch = state.get("kept"), state.get("kept_epoch")
            self.kept_weights = state.get("kept_weights")


def improves(metric: str, value: float, best: float | None) -> bool:
    """The rule of the best checkpoint (best.pt): at least as good in the metric's direction
    (higher top-1, mAP or mIoU; lower loss). A tie keeps the later checkpoint (issue 33): the same
    number after more training is what most users mean by their best weights, and Keras's and
    DIGITS's "first strictly better" left a run that plateaued delivering its earliest weights."""
    if best is None:
        return True
    return value >= best if METRIC_DIRECTION[metric] == "max" else value <= best


def early_stop_outcome(
    stopper: EarlyStopping, cfg: TrainConfig, *, step: int, epoch: float, averaged: bool = False
) -> Outcome:
    """A run ended by its rule: done, saying where it stopped of how many epochs and the one best
    a user can use, the best checkpoint's (`best.pt`: the best value of the metric the rule
    watches, at its epoch). The rule's own best moves only by more than the delta, so it may be
    an earlier, lower one: naming it beside the kept one made the run contradict itself."""
    kept, kept_epoch = stopper.kept, stopper.kept_epoch
    # `averaged`: the run keeps a weights' average (EMA); the rule watched the metric of the
    # weights each checkpoint holds (protocol.checkpoint_weights), and says whose the kept one is.
    watched = f"{stopper.metric} of the checkpoints' weights (raw or EMA)" if averaged else stopper.metric
    message = (
        f"stopped early at epoch {plain(epoch)} of {plain(cfg.epochs)}: {watched} has not improved by more "
        f"than {stopper.min_delta:g} for {stopper.patience} validation{'s' if stopper.patience > 1 else ''}"
    )
    if kept is not None:
        weights = WEIGHTS_WORDS.get(stopper.kept_weights or AVERAGE) if averaged else None
        value = metric_text(stopper.metric, kept) + (f" ({weights})" if weights else "")
        message += f"; the best checkpoint is kept: {value} at epoch {plain(kept_epoch)}"
    return Outcome.done(
        message,
        step=step,
        early_stopped=True,
        stopped_epoch=round(epoch, 5),
        epochs=cfg.epochs,
        best_metric=stopper.metric,
        best=kept,
        best_epoch=kept_epoch,
        best_weights=stopper.kept_weights if averaged else None,
    )


def plain(epoch: float | None) -> str:
    """An epoch as a person writes it: 8, 2.5 (steps make 7.99999 of 8)."""
    return "?" if epoch is None else f"{round(epoch, 2):g}"


def metric_text(metric: str, value: float) -> str:
    """Accuracy as a percentage with two decimals and a loss with four, as the workbench's pages
    write them (workbench/runs/templatetags/numbers.py, static/workbench/format.js)."""
    if metric == "val_loss":
        return f"val. loss {value:.4f}"
    if metric in ("top1", "top5", "pixel_accuracy"):
        return f"{METRIC_WORDS[metric]} {100 * value:.2f}%"
    return f"{METRIC_WORDS.get(metric, metric)} {value:.4f}"


def early_stopping_for(cfg: TrainConfig, *, metric: str | None = None) -> EarlyStopping | None:
    """The rule of `cfg`, watching `metric` (the run's best metric for its task; the config's by default)."""
    if not cfg.early_stopping_patience:
        return None
    return EarlyStopping(metric or cfg.best_metric, cfg.early_stopping_patience, cfg.early_stopping_min_delta)
