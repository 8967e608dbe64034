"""manage.py benchmark: queue a benchmark (as POST /api/benchmarks/ and the form do) and, with
--wait, print its table when it ends."""

from __future__ import annotations

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from datasets.models import Dataset
from trainer.bench import table as bench_table
from trainer.bench.config import BENCHMARK_NETWORKS
from trainer.config import PRECISIONS
from workbench.benchmarks.models import Benchmark
from workbench.benchmarks.selectors import benchmark_payload, cells_of
from workbench.benchmarks.services import benchmark_submit
from workbench.core.adapters import command_error
from workbench.core.commands import command_owner
from workbench.core.errors import RequestError


class Command(BaseCommand):
    help = "Measure training images/s of networks against GPU count and per-GPU batch size."

    def add_arguments(self, parser):
        parser.add_argument(
            "--network",
            action="append",
            choices=BENCHMARK_NETWORKS,
            help="repeat for several networks (a detection or segmentation network is measured with its task's step)",
        )
        parser.add_argument("--image-size", type=int, help="synthetic images' side (default 224)")
        parser.add_argument("--gpus", help="GPU counts, the columns: 1,2,4 (default 1)")
        parser.add_argument("--batch-sizes", help="per-GPU batch sizes, the rows: 32,64,128,256")
        parser.add_argument("--precision", choices=PRECISIONS)
        parser.add_argument("--data", help="synthetic (default) or dataset:<id> (the real input pipeline)")
        parser.add_argument("--layout", help="data (default) or stages x groups for model parallel: 2x1, 2x2")
        parser.add_argument(
            "--mode", choices=("train", "forward", "both"), help="forward + backward (default) or forward only"
        )
        parser.add_argument("--steps", type=int, help="timed steps per cell (default 10)")
        parser.add_argument("--warmup-steps", type=int, help="untimed steps first (default 3)")
        parser.add_argument("--find-largest", action="store_true", help="also find the largest batch that fits")
        parser.add_argument(
            "--time-budget", type=int, help="minutes it may hold its GPUs; stopped there, cells kept (default 60)"
        )
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--owner",
            help="username of the owner (default: the dataset's owner, else the only superuser)",
        )
        parser.add_argument("--wait", action="store_true", help="wait for the end, printing progress, then the table")
        parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
        parser.add_argument("--timeout", type=float, default=24 * 3600, help="with --wait: give up after this (s)")

    def handle(self, *args, **options):
        owner = self._owner(options)
        request = {
            "name": options["name"],
            "networks": options["network"],
            "image_size": options["image_size"],
            "gpus": options["gpus"],
            "batch_sizes": options["batch_sizes"],
            "precision": options["precision"],
            "data": options["data"],
            "layout": options["layout"],
            "modes": options["mode"],
            "steps": options["steps"],
            "warmup_steps": options["warmup_steps"],
            "find_largest": options["find_largest"] or None,
            "time_budget_minutes": options["time_budget"],
        }
        try:
            benchmark = benchmark_submit(owner=owner, request={k: v for k, v in request.items() if v})
        except RequestError as error:
            raise command_error(error) from None
        if not options["wait"]:
            self._print(benchmark, options["format"], queued=True)
            return
        benchmark = self._wait(benchmark, options["timeout"])
        self._print(benchmark, options["format"])
        if benchmark.state != Benchmark.State.DONE:
            raise CommandError(f"benchmark {benchmark.pk} {benchmark.state}: {benchmark.reason}")

    @staticmethod
    def _owner(options):
        """The dataset's owner for --data dataset:<id>; else the one rule of every command."""
        data, dataset = options["data"] or "", None
        if data.startswith("dataset:") and data[8:].isdecimal():
            dataset = Dataset.objects.filter(pk=int(data[8:])).select_related("owner").first()
        return command_owner(options["owner"], default=dataset.owner if dataset is not None else None)

    def _wait(self, benchmark: Benchmark, timeout: float) -> Benchmark:
        deadline, last = time.monotonic() + timeout, None
        while True:
            benchmark.refresh_from_db()
            line = f"benchmark {benchmark.pk}: {benchmark.state} {100 * benchmark.progress:.0f}%"
            if benchmark.state == Benchmark.State.WAITING:
                line += f" ({benchmark.wait_reason})"
            if line != last:
                self.stderr.write(line)
                last = line
            if not benchmark.is_active:
                return benchmark
            if time.monotonic() > deadline:
                raise CommandError(f"benchmark {benchmark.pk} still {benchmark.state} after {timeout:.0f} s")
            time.sleep(1.0)

    def _print(self, benchmark: Benchmark, fmt: str, *, queued: bool = False) -> None:
        if fmt == "json":
            self.stdout.write(json.dumps(benchmark_payload(benchmark), indent=2, default=str))
        elif fmt == "csv":
            sys.stdout.flush()
            self.stdout.write(bench_table.to_csv(cells_of(benchmark)), ending="")
        elif queued:
            self.stdout.write(f"benchmark {benchmark.pk} queued: {benchmark.name}")
        else:
            self.stdout.write(bench_table.markdown(cells_of(benchmark), title=f"Benchmark #{benchmark.pk}"))
