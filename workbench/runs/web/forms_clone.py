"""Clone: the new-run form's initial values that reproduce a run, its starting weights named by
the reference they came from (never a server path)."""

from __future__ import annotations

import contextlib
import json

from workbench.core.errors import RequestError
from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.runs.web.forms import CONFIG_PATH, SWEPT_PATH
from workbench.weights.models import StoredWeights
from workbench.weights.references import reference_parse


def initial_from_run(run: Run) -> dict:
    """The form's initial values that reproduce `run` (Clone): each setting of CONFIG_PATH the
    run stored; one it did not (a run made before every setting was stored) keeps the default."""
    config = run.config or {}
    initial = {"name": f"{run.name} (clone)"[:150], "dataset": run.dataset_id, "network": run.network}
    for name, path in {**CONFIG_PATH, **SWEPT_PATH}.items():
        parent, _, leaf = path.rpartition(".")
        part = config.get(parent) if parent else config
        if isinstance(part, dict) and part.get(leaf) is not None:
            initial[name] = part[leaf]
    if "batch_size" in initial:
        initial["batch_size"] = str(initial["batch_size"])
    if "base_lr" in initial:
        initial["base_lr"] = f"{initial['base_lr']:g}"
    for name in ("step_values", "rrc_scale", "rrc_ratio"):  # lists, as the form's text shows them
        if name in initial:
            initial[name] = ", ".join(f"{v:g}" for v in initial[name])
    if initial.get("custom_layers"):
        initial["custom_layers"] = json.dumps(initial["custom_layers"])
    reference = config.get("pretrained")  # stored as the reference: weights:, upload:, run:
    if reference:
        initial.update(start_of(reference))
    request = run.devices_wanted
    initial["device_mode"] = request.kind  # the form's modes are the request's kinds
    if request.kind == DeviceRequest.COUNT:
        initial["gpu_count"] = request.count
    if request.is_specific:
        initial["gpus"] = [f"{request.host}:{i}" for i in request.indices]
    return initial


def start_of(reference: str) -> dict:
    """The "Start from" of a clone's weights: the store's chosen in its own menu, as the run was made
    (by "the weights the cloned run started from" the store's row stood unchosen in its menu);
    a run's or an upload's, or a row no longer in the store, by the reference itself."""
    with contextlib.suppress(RequestError):
        parsed = reference_parse(reference)
        row = StoredWeights.objects.filter(pk=parsed.pk).first() if parsed.scheme == "weights" else None
        if row is not None and row.present:
            return {"start_from": "weights", "stored_weights": str(row.pk)}
    return {"start_from": "path", "pretrained_path": reference}
