"""The `run:` scheme of the reference grammar (workbench/weights/references.py): starting a run from
the weights of another run's checkpoint. The runs app registers it from its AppConfig.ready(),
so the weights app, below runs, never imports runs.

Checked at submit (the run is visible to the user, trained the same network, has the checkpoint
asked for), copied at launch: the first launch of the new run copies the checkpoint's weights
into its own run folder (START_WEIGHTS), and every later launch (a resume, a retry) reads that
copy, so a run resumes from the weights it started from after the source's checkpoints rotate or
the source run is deleted. The copy is written by the worker that launches the run, never by a
validator or a page.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from trainer import protocol
from trainer.weights_file import WeightsFileError, read_weights
from workbench.runs.models import Run
from workbench.runs.selectors import runs_visible_to
from workbench.weights.references import Reference, WeightsReferenceError, reference_describe

# In the new run's own folder: the weights it started from, and where they came from.
START_WEIGHTS = "start-weights.pt"
START_SOURCE = "start-weights.json"


def checkpoint_of(run: Run, which: str | int) -> Path | None:
    """The run's best checkpoint (its latest when it has no best yet), its latest for "last", or
    its snapshot at a step."""
    if which == "last":
        return protocol.latest_checkpoint(run.run_dir)
    if isinstance(which, int):
        return next((path for step, path in protocol.snapshots(run.run_dir) if step == which), None)
    return protocol.best_checkpoint(run.run_dir) or protocol.latest_checkpoint(run.run_dir)


def checkpoint_epoch(run: Run, which: str | int) -> float | None:
    """The epoch of the checkpoint `checkpoint_of(run, which)` names, from the checkpoint index
    (no torch, no checkpoint read: the new-run form labels every run with it); None when the
    index does not say (a snapshot saved between validations)."""
    path = checkpoint_of(run, which)
    if path is None:
        return None
    index = protocol.read_index(run.run_dir)
    meta = index["best"] if path.name == protocol.BEST else index["snapshots"].get(path.name)
    epoch = (meta or {}).get("epoch")
    return float(epoch) if isinstance(epoch, int | float) else None


def _copy_weights(source: Path, *, run_pk: int, target: Path) -> float | None:
    """The weights of checkpoint `source` written to `target` (temp file, then renamed); their epoch."""
    # torch only here, in the worker that launches the run: pages and validators never pay for it.
    import torch  # torch: loaded only where a launch copies a run's weights

    try:
        # The one reader, as for every weights file; no byte limit: our trainer wrote it, and a
        # checkpoint's optimizer state may be larger than the weights themselves.
        weights = read_weights(source, name=f"run #{run_pk}'s checkpoint", max_bytes=None)
    except WeightsFileError:
        raise WeightsReferenceError(f"run #{run_pk}'s checkpoint cannot be read") from None
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        torch.save(weights.state, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return weights.epoch


class RunScheme:
    """`run:<id>[:best|:last|:<step>]`: a run the user may see, of the same network."""

    name = "run"

    def _run(self, reference: Reference, owner) -> Run:
        run = runs_visible_to(owner).filter(pk=reference.pk).first()
        if run is None:
            raise WeightsReferenceError()
        return run

    def check(self, reference: Reference, *, owner, network: str) -> None:
        run = self._run(reference, owner)
        # From here on the run is the user's to see: naming what is wrong with it tells nothing new.
        if run.network != network:
            raise WeightsReferenceError(
                f"run #{run.pk} trained a {run.network}; choose network {run.network} to start from its weights"
            )
        if checkpoint_of(run, reference.which) is None:
            step = f" at step {reference.which}" if isinstance(reference.which, int) else ""
            raise WeightsReferenceError(f"run #{run.pk} has no checkpoint{step} yet")

    def path(self, reference: Reference, *, owner, run_dir: Path) -> Path:
        target = Path(run_dir) / START_WEIGHTS
        if target.is_file():  # a later launch of the same run: the weights it started from
            return target
        run = self._run(reference, owner)
        source = checkpoint_of(run, reference.which)
        if source is None:
            raise WeightsReferenceError(f"run #{run.pk} has no checkpoint yet")
        target.parent.mkdir(parents=True, exist_ok=True)
        epoch = _copy_weights(source.resolve(), run_pk=run.pk, target=target)
        # The run page names the epoch fine-tuned from after the source's checkpoints rotate.
        (Path(run_dir) / START_SOURCE).write_text(json.dumps({"reference": str(reference), "epoch": epoch}))
        return target

    def describe(self, reference: Reference, *, viewer, run_dir: Path) -> dict | None:
        source = runs_visible_to(viewer).filter(pk=reference.pk).first()
        try:
            epoch = json.loads((Path(run_dir) / START_SOURCE).read_text()).get("epoch")
        except (OSError, ValueError):  # not launched yet: the checkpoint it will start from
            epoch = checkpoint_epoch(source, reference.which) if source else None
        if reference.which == "best":
            checkpoint = "best"
        elif reference.which == "last":
            checkpoint = "latest snapshot"
        else:
            checkpoint = f"snapshot at step {reference.which}"
        return {"kind": "run", "run": source, "epoch": epoch, "checkpoint": checkpoint}

    def preprocessing(self, reference: Reference) -> dict:
        return {}  # a run's normalisation is in its own config, which the form copies when cloning


def weights_source_for(user, run: Run) -> dict | None:
    """What `run` was fine-tuned from, as `user` may see it (None: trained from scratch)."""
    return reference_describe((run.config or {}).get("pretrained"), viewer=user, run_dir=run.run_dir)
