"""Clone: the new-run form's initial values that reproduce a run, its starting weights named by
the reference they came from (never a server path)."""

from __future__ import annotations

import json

from workbench.runs.devices import DeviceRequest
from workbench.runs.models import Run
from workbench.runs.pretrained import reference_for_path

# The form fields copied as they are, per part of the stored config.
COPIED = {
    "config": (
        "epochs", "grad_accum", "val_interval", "snapshot_interval", "seed", "precision", "channels_last",
        "compile", "best_metric", "model_parallel", "early_stopping_patience", "early_stopping_min_delta",
    ),
    "solver": (
        "optimizer", "momentum", "weight_decay", "lr_policy", "gamma", "power", "step_size", "min_lr",
        "warmup_percent", "onecycle_pct_start", "onecycle_div_factor", "onecycle_final_div_factor", "grad_clip_norm",
    ),
    "data": ("crop_size", "random_flip", "vertical_flip", "mean_subtraction", "num_workers"),
}  # fmt: skip


def initial_from_run(run: Run) -> dict:
    """The form's initial values that reproduce `run` (Clone)."""
    config = run.config or {}
    solver, data = config.get("solver") or {}, config.get("data") or {}
    initial = {"name": f"{run.name} (clone)"[:150], "dataset": run.dataset_id, "network": run.network}
    for part, values in (("config", config), ("solver", solver), ("data", data)):
        initial.update({key: values[key] for key in COPIED[part] if key in values})
    if "batch_size" in config:
        initial["batch_size"] = str(config["batch_size"])
    if "base_lr" in solver:
        initial["base_lr"] = f"{solver['base_lr']:g}"
    if "step_values" in solver:
        initial["step_values"] = ", ".join(f"{v:g}" for v in solver["step_values"])
    if config.get("custom_layers"):
        initial["custom_layers"] = json.dumps(config["custom_layers"])
    reference = reference_for_path(config.get("pretrained"))
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
