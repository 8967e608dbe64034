"""Downsampling a long metric series for a chart: ours (vectorised bucketed min/max) vs naive.

Part 1, in memory: 1,000,000 points of a noisy decaying loss with one-step spikes and dips, cut to
2,000 points. Ours = workbench.runs.series.minmax_indices (numpy). Baselines: the same bucketed
min/max as a plain Python loop (same answer, to compare speed) and every-k-th-point striding
(fast, but spikes between strides vanish: that is the quality baseline).

Part 2, from the database: a run with N stored metrics events (SQLite, WAL). Ours = the series
endpoint's path (workbench.runs.series.run_series: one values_list query for the rows not read yet,
numpy columns cached per process, min/max to 2,000 points), cold and warm. Naive = load every
event as a model instance, build Python lists, stride them.

    .venv/bin/python bench/bench_downsample.py [--points 1000000] [--events 200000]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def series_values(count: int, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    steps = np.arange(count)
    values = 2.0 * np.exp(-steps / (count / 4)) + 0.1 + rng.normal(0, 0.02, count)
    extremes = sorted(rng.choice(count, 20, replace=False).tolist())
    for number, index in enumerate(extremes):
        values[index] = 5.0 if number % 2 else -1.0  # spikes (divergence) and dips
    return values, extremes


def naive_minmax(values: list[float], points: int) -> list[int]:
    buckets = max(1, (points - 2) // 2)
    size = math.ceil(len(values) / buckets)
    keep = {0, len(values) - 1}
    for start in range(0, len(values), size):
        low = high = start
        for index in range(start, min(start + size, len(values))):
            if values[index] < values[low]:
                low = index
            if values[index] > values[high]:
                high = index
        keep.update((low, high))
    return sorted(keep)


def best_of(function, repeat: int = 3) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def in_memory(count: int, points: int) -> list[tuple]:
    from workbench.runs.series import minmax_indices, naive_stride_indices

    values, extremes = series_values(count)
    as_list = values.tolist()
    ours_s, ours = best_of(lambda: minmax_indices(values, points))
    loop_s, loop = best_of(lambda: naive_minmax(as_list, points), repeat=1)
    stride_s, stride = best_of(lambda: naive_stride_indices(count, points))
    assert list(ours) == loop, "the vectorised and the loop min/max must choose the same points"

    def kept(indices) -> str:
        return f"{len(set(extremes) & set(int(i) for i in indices))}/{len(extremes)}"

    return [
        ("numpy min/max (ours)", ours_s, len(ours), kept(ours)),
        ("Python loop min/max", loop_s, len(loop), kept(loop)),
        ("stride every k-th", stride_s, len(stride), kept(stride)),
    ]


def setup_django() -> None:
    os.environ.update(DJANGO_SETTINGS_MODULE="workbench.settings", WORKBENCH_DATA_DIR=tempfile.mkdtemp(prefix="bench-"))
    os.environ.pop("REDIS_URL", None)  # no broker: events are stored, not published
    import django

    django.setup()


def from_database(events: int, points: int) -> list[tuple]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from datasets.models import Dataset
    from workbench.runs import series
    from workbench.runs.models import Run, RunEvent

    call_command("migrate", verbosity=0)
    owner = get_user_model().objects.create_user("bench")
    dataset = Dataset.objects.create(owner=owner, name="bench", status=Dataset.Status.READY)
    run = Run.objects.create(owner=owner, dataset=dataset, name="bench", network="lenet")
    values, extremes = series_values(events, seed=1)
    rows = [
        RunEvent(run=run, seq=i + 1, kind="metrics", step=i + 1, epoch=(i + 1) / 1000, time=1e9 + i,
                 data={"images_seen": (i + 1) * 64, "loss": float(v), "lr": 0.1, "images_per_sec": 900.0,
                       "data_wait_share": 0.05})
        for i, v in enumerate(values)
    ]  # fmt: skip
    RunEvent.objects.bulk_create(rows, batch_size=5000)
    Run.objects.filter(pk=run.pk).update(last_seq=events)
    spikes = {i + 1 for i in extremes}  # steps

    def ours():
        return series.run_series(run, ["loss"], points=points)["series"]["loss"]

    started = time.perf_counter()
    cold = ours()
    cold_s = time.perf_counter() - started
    warm_s, warm = best_of(ours)

    def naive():
        chosen = []
        everything = list(RunEvent.objects.filter(run=run, kind="metrics").order_by("seq"))
        stride = max(1, math.ceil(len(everything) / points))
        for event in everything[::stride]:
            chosen.append((event.step, event.data["loss"]))
        return chosen

    naive_s, chosen = best_of(naive, repeat=1)

    def kept_steps(steps) -> str:
        return f"{len(spikes & {int(s) for s in steps})}/{len(spikes)}"

    return [
        ("series endpoint, cold (ours)", cold_s, len(cold["points"]["step"]), kept_steps(cold["points"]["step"])),
        ("series endpoint, warm (ours)", warm_s, len(warm["points"]["step"]), kept_steps(warm["points"]["step"])),
        ("ORM instances + stride", naive_s, len(chosen), kept_steps(step for step, _ in chosen)),
    ]


def table(title: str, rows: list[tuple]) -> None:
    reference = rows[0][1]
    print(f"\n{title}\n")
    print("| method | time | points out | spikes and dips kept | time vs ours |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, seconds, count, kept in rows:
        print(f"| {name} | {seconds * 1000:,.1f} ms | {count:,} | {kept} | {seconds / reference:,.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="in-memory series length")
    parser.add_argument("--events", type=int, default=200_000, help="stored metrics events")
    parser.add_argument("--out", type=int, default=2000, help="points per trace")
    args = parser.parse_args()
    setup_django()
    table(f"In memory: {args.points:,} points to {args.out:,}", in_memory(args.points, args.out))
    table(f"From the database: {args.events:,} metrics events to {args.out:,}", from_database(args.events, args.out))


if __name__ == "__main__":
    main()
