"""Clone: the new-run form's initial values that reproduce a run, its starting weights named by
the reference they came from (never a server path)."""

from __future__ import annotations

import json

from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.runs.web.forms import CONFIG_PATH, SWEPT_PATH


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
        initial["start_from"] = "path"
        initial["pretrained_path"] = reference
    request = run.devices_wanted
    initial["device_mode"] = request.kind  # the form's modes are the request's kinds
    if request.kind == DeviceRequest.COUNT:
        initial["gpu_count"] = request.count
    if request.is_specific:
        initial["gpus"] = [f"{request.host}:{i}" for i in request.indices]
    return initial
