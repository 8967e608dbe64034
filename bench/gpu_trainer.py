"""GPU throughput table for the trainer (called by bench/gpu.sh; `--size tiny` runs on the CPU).

Rows: ResNet-50 at 224x224, bf16 and fp32, batch 64/128/256 (per process), synthetic data already
on the GPU (the engine's ceiling) and LMDB data through the real input pipeline, on 1 GPU and on
all GPUs (DDP); with two GPUs or more, also the network split over two GPUs in one process (model
parallel), against the one-GPU synthetic rows. Stops starting new rows when the time budget is
spent, so it ends in time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.benchmarking import engine_run_in_memory, random_batches, time_engine  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.engine import torch_device  # noqa: E402
from trainer.events import ListReporter  # noqa: E402
from trainer.run import train  # noqa: E402

SIZES = {
    # network, side, per-device batches, precisions, LMDB images, device list for 1 and "all"
    "full": dict(
        network="resnet50", side=224, batches=[64, 128, 256], precisions=["bf16", "fp32"], images=2560, steps=30
    ),
    # The same code paths (synthetic, LMDB, 1 and 2 processes) in seconds on a CPU, for tests.
    "tiny": dict(network="lenet", side=16, batches=[8], precisions=["fp32"], images=32, steps=4),
}


def _devices(size: str) -> tuple[list, list]:
    if size == "tiny":
        return ["cpu"], ["cpu", "cpu"]
    count = torch.cuda.device_count()
    return [0], list(range(count))


def _synthetic(
    spec: dict, folder: Path, tmp: Path, devices: list, precision: str, batch: int, model_parallel: int = 1
) -> dict:
    """One process; with model_parallel, the network split over `devices` (the batch is per process)."""
    device = torch_device(devices[0])
    cfg = config_from_dict(
        {
            "run_dir": str(tmp / "syn"),
            "network": spec["network"],
            "batch_size": batch,
            "epochs": 1,
            "precision": precision,
            "channels_last": device.type == "cuda",
            "devices": devices,
            "model_parallel": model_parallel,
            "val_interval": 0,
            "snapshot_interval": 0,
            "metrics_interval": 10,
            "data": {"dataset": str(folder), "num_workers": 0},
        }
    )
    batches = random_batches(max(2, spec["steps"] // 3), batch, (3, spec["side"], spec["side"]), 10, device)
    timing = time_engine(engine_run_in_memory(cfg, batches, device), 3)
    return {"images_per_sec": timing.images_per_sec, "data_wait_share": 0.0}


def _lmdb(spec: dict, folder: Path, tmp: Path, devices: list, precision: str, batch: int) -> dict:
    world = len(devices)
    workers = 2 if devices[0] == "cpu" else max(2, min(8, (os.cpu_count() or 8) // world - 1))
    steps_per_epoch = spec["images"] // (batch * world)
    if steps_per_epoch < 1:
        return {"skipped": f"needs more than {spec['images']} images"}
    reporter = ListReporter()
    code = train(
        config_from_dict(
            {
                "run_dir": str(tmp / f"lmdb_{world}_{precision}_{batch}"),
                "network": spec["network"],
                "batch_size": batch * world,
                "epochs": max(1.0, spec["steps"] / steps_per_epoch),
                "precision": precision,
                "channels_last": devices[0] != "cpu",
                "devices": devices,
                "val_interval": 0,
                "snapshot_interval": 0,
                "metrics_interval": max(1, min(5, spec["steps"] // 3)),
                "data": {"dataset": str(folder), "num_workers": workers},
            }
        ),
        reporter=reporter,
    )
    if code != 0:
        return {"skipped": reporter.events[-1].get("message", "failed")[:120]}
    metrics = reporter.of_type("metrics")[1:] or reporter.of_type("metrics")
    return {
        "images_per_sec": statistics.median(m["images_per_sec"] for m in metrics),
        "data_wait_share": statistics.mean(m["data_wait_share"] for m in metrics),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no new row after this")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    spec = SIZES[args.size]
    if args.size == "full" and not torch.cuda.is_available():
        print("gpu_trainer.py: CUDA is not available; use --size tiny on the CPU", file=sys.stderr)
        return 2
    one, every = _devices(args.size)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = make_dataset_folder(
            tmp / "ds", num_classes=10, size=spec["side"], channels=3, train=spec["images"], val=0
        )
        plan = [("synthetic", one, p, b) for p in spec["precisions"] for b in spec["batches"]]
        plan += [("lmdb", one, p, b) for p in spec["precisions"] for b in spec["batches"]]
        if len(every) > 1:
            plan += [("lmdb", every, p, b) for p in spec["precisions"] for b in spec["batches"]]
            # The network split over two devices (one process): what model parallelism costs
            # against the one-device synthetic rows above, at the same batch.
            plan += [("synthetic, split over 2", every[:2], p, b) for p in spec["precisions"] for b in spec["batches"]]
        for data, devices, precision, batch in plan:
            row = {"data": data, "devices": len(devices), "precision": precision, "batch_per_device": batch}
            if time.monotonic() - started > args.budget_s:
                row["skipped"] = "time budget"
            else:
                try:
                    if data == "lmdb":
                        row.update(_lmdb(spec, folder, tmp, devices, precision, batch))
                    else:
                        row.update(_synthetic(spec, folder, tmp, devices, precision, batch, len(devices)))
                except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
                    row["skipped"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    device_name = torch.cuda.get_device_name(0) if args.size == "full" else "cpu"
    print(
        f"{spec['network']} {spec['side']}x{spec['side']} on {device_name}, torch {torch.__version__}, "
        f"{time.monotonic() - started:.0f}s"
    )
    print("| data | devices | precision | batch/process | images/s | images/s per device | data-wait |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "skipped" in r:
            print(
                f"| {r['data']} | {r['devices']} | {r['precision']} | {r['batch_per_device']} | "
                f"skipped: {r['skipped']} | | |"
            )
        else:
            print(
                f"| {r['data']} | {r['devices']} | {r['precision']} | {r['batch_per_device']} | "
                f"{r['images_per_sec']:,.0f} | {r['images_per_sec'] / r['devices']:,.0f} | "
                f"{r['data_wait_share']:.1%} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
