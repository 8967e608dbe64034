"""GPU throughput tables for the trainer (called by bench/gpu.sh; `--size tiny` runs on the CPU).

A thin call of benchmark mode (`trainer.bench.run.run_benchmark`, what `manage.py benchmark` and
the Benchmarks page run): ResNet-50 at 224x224, bf16 and fp32, per-GPU batch 64/128/256, on 1 GPU
and on all GPUs, with synthetic data on the GPU (the engine's ceiling) and LMDB data through the
real input pipeline; with two GPUs or more, also the network split over two GPUs (model
parallel). Prints the markdown tables; stops starting new tables when the time budget is spent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.trainer_data import make_dataset_folder  # noqa: E402
from trainer.bench import table as bench_table  # noqa: E402
from trainer.bench.config import benchmark_from_dict  # noqa: E402
from trainer.bench.run import run_benchmark  # noqa: E402
from trainer.events import Events, ListReporter  # noqa: E402
from trainer.protocol import CELL  # noqa: E402
from trainer.stopping import StopFlag  # noqa: E402

SIZES = {
    "full": dict(network="resnet50", side=224, batches=[64, 128, 256], precisions=["bf16", "fp32"], images=2560),
    # The same code paths (synthetic, LMDB, 1 and 2 processes, split) in seconds on a CPU, for tests.
    "tiny": dict(network="lenet", side=16, batches=[8], precisions=["fp32"], images=64),
}


def plans(spec: dict, devices: list, folder: Path, tmp: Path) -> list[dict]:
    every = [1, len(devices)] if len(devices) > 1 else [1]
    base = {
        "networks": [spec["network"]],
        "image_size": spec["side"],
        "num_classes": 10,
        "devices": devices,
        "batch_sizes": spec["batches"],
        "precisions": spec["precisions"],
        "channels_last": devices[0] != "cpu",
        "steps": 10 if devices[0] != "cpu" else 3,
        "warmup_steps": 5 if devices[0] != "cpu" else 1,
        "num_workers": 2 if devices[0] == "cpu" else 6,
    }
    out = [
        {**base, "run_dir": str(tmp / "synthetic"), "gpu_counts": every},
        {**base, "run_dir": str(tmp / "lmdb"), "gpu_counts": every, "data": str(folder)},
    ]
    if len(devices) > 1:
        out.append({**base, "run_dir": str(tmp / "split"), "gpu_counts": [2], "model_parallel": 2})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no new table after this")
    parser.add_argument("--json", help="also write the cells here")
    args = parser.parse_args()
    spec = SIZES[args.size]
    if args.size == "full" and not torch.cuda.is_available():
        print("gpu_trainer.py: CUDA is not available; use --size tiny on the CPU", file=sys.stderr)
        return 2
    devices = ["cpu", "cpu"] if args.size == "tiny" else list(range(torch.cuda.device_count()))
    started, cells = time.monotonic(), []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder = make_dataset_folder(
            tmp / "ds", num_classes=10, size=spec["side"], channels=3, train=spec["images"], val=0
        )
        for raw in plans(spec, devices, folder, tmp):
            if time.monotonic() - started > args.budget_s:
                print(f"skipped (time budget): {Path(raw['run_dir']).name}", file=sys.stderr)
                continue
            reporter = ListReporter()
            run_benchmark(benchmark_from_dict(raw), events=Events(reporter), stop=StopFlag())
            split = raw.get("model_parallel", 1) > 1
            for cell in reporter.of_type(CELL):
                cell["data"] = f"{cell['data']}, split over 2" if split else cell["data"]
                cells.append(cell)
                print(json.dumps({k: v for k, v in cell.items() if k != "time"}), file=sys.stderr, flush=True)
    device_name = torch.cuda.get_device_name(0) if args.size == "full" else "cpu (2 simulated GPUs)"
    print(f"{spec['network']} {spec['side']}x{spec['side']} on {device_name}, torch {torch.__version__}, "
          f"{time.monotonic() - started:.0f}s")  # fmt: skip
    print(bench_table.markdown(cells))
    if args.json:
        Path(args.json).write_text(json.dumps(bench_table.derive(cells), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
