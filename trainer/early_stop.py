"""Early stopping: end a run when its validation metric (`best_metric`) has not improved by more
than `early_stopping_min_delta` for `early_stopping_patience` validations in a row. The best
checkpoint is kept as always; the final status says why it ended, so the run's timeline does.
Its count is saved in every checkpoint, so a run resumed after an interruption keeps counting."""

from __future__ import annotations

from dataclasses import dataclass

from trainer.config import TrainConfig


@dataclass
class EarlyStopping:
    metric: str
    patience: int
    min_delta: float
    best: float | None = None
    best_epoch: float = 0.0
    stale: int = 0  # validations in a row without enough improvement
    triggered: bool = False

    def update(self, value: float, *, epoch: float) -> None:
        higher_is_better = self.metric == "top1"
        gain = (value - self.best if higher_is_better else self.best - value) if self.best is not None else None
        if gain is None or gain > self.min_delta:
            self.best, self.best_epoch, self.stale = value, epoch, 0
            return
        self.stale += 1
        self.triggered = self.stale >= self.patience

    def state(self) -> dict:
        """What a checkpoint keeps, so a resumed run goes on counting where it was."""
        return {"best": self.best, "best_epoch": self.best_epoch, "stale": self.stale}

    def load(self, state: dict | None) -> None:
        """From a checkpoint's `state()`; a checkpoint written without one (or with early stopping
        off) starts counting afresh."""
        if state:
            self.best, self.best_epoch, self.stale = state["best"], float(state["best_epoch"]), int(state["stale"])
            self.triggered = self.stale >= self.patience

    def reason(self, epoch: float) -> str:
        return (
            f"stopped early at epoch {epoch:.2f}: {self.metric} has not improved by more than "
            f"{self.min_delta:g} for {self.patience} validation(s) (best {self.best:.4f} at epoch "
            f"{self.best_epoch:.2f}; the best checkpoint is kept)"
        )


def early_stopping_for(cfg: TrainConfig) -> EarlyStopping | None:
    if not cfg.early_stopping_patience:
        return None
    return EarlyStopping(cfg.best_metric, cfg.early_stopping_patience, cfg.early_stopping_min_delta)
