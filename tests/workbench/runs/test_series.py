"""Series reading and downsampling: bounded counts, peaks and dips kept, full resolution when small."""

import math

import numpy as np
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workbench.runs import series
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run


def metrics(step: int, loss: float, **extra) -> dict:
    return {
        "type": "metrics",
        "time": 1_000.0 + step,
        "step": step,
        "epoch": step / 100,
        "images_seen": step * 32,
        "loss": loss,
        "lr": 0.1,
        **extra,
    }


def append_losses(run: Run, losses, batch: int = 5000) -> None:
    events = [metrics(step, float(loss)) for step, loss in enumerate(losses, start=1)]
    for first in range(0, len(events), batch):
        run_events_append(run_id=run.pk, events=events[first : first + batch])


def test_it_bounds_the_point_count_and_keeps_the_first_and_last():
    values = np.random.default_rng(0).normal(size=100_000)
    for points in (10, 500, 2000):
        kept = series.minmax_indices(values, points)
        assert len(kept) <= points
        assert kept[0] == 0 and kept[-1] == len(values) - 1
        assert np.all(np.diff(kept) > 0)


def test_it_keeps_a_one_point_spike_and_dip_that_striding_loses():
    values = np.sin(np.linspace(0, 20, 1_000_001))
    values[123_457] = 50.0
    values[876_541] = -50.0
    kept = series.minmax_indices(values, 2000)
    assert 123_457 in kept and 876_541 in kept
    strided = series.naive_stride_indices(len(values), 2000)
    assert 123_457 not in strided and 876_541 not in strided


def test_it_keeps_every_buckets_extremes():
    values = np.random.default_rng(1).normal(size=50_000)
    kept = set(series.minmax_indices(values, 1000).tolist())
    size = math.ceil(len(values) / ((1000 - 2) // 2))
    for start in range(0, len(values), size):
        bucket = values[start : start + size]
        assert start + int(bucket.argmin()) in kept and start + int(bucket.argmax()) in kept


def test_it_reads_the_series_with_one_query_and_then_only_new_rows(run):
    append_losses(run, np.linspace(2, 1, 300))
    with CaptureQueriesContext(connection) as queries:
        first = series.run_series(run, ["loss"])
    assert len(queries) == 1
    assert first["series"]["loss"]["total"] == 300
    append_losses(run, [0.5, 0.4])
    with CaptureQueriesContext(connection) as queries:
        second = series.run_series(run, ["loss"])
    assert len(queries) == 1 and '"seq" >' in queries[0]["sql"]
    assert second["series"]["loss"]["points"]["value"][-2:] == [0.5, 0.4]
    assert second["last_seq"] == run.last_seq + 302


def test_it_gives_every_point_all_four_x_coordinates(run):
    append_losses(run, [3.0, 2.0])
    validation = {"type": "validation", "time": 1003.0, "step": 2, "epoch": 0.02, "top1": 0.5}
    run_events_append(run_id=run.pk, events=[validation])
    data = series.run_series(run, ["loss", "top1"])["series"]
    assert data["loss"]["points"]["images"] == [32.0, 64.0]
    # Validation events carry only the step; images seen come from the run's images per step.
    top1 = data["top1"]["points"]
    assert (top1["step"], top1["epoch"], top1["time"], top1["images"]) == ([2.0], [0.02], [1003.0], [64.0])


def test_it_downsamples_a_long_series_and_keeps_its_peak(run):
    losses = np.linspace(2.0, 0.1, 12_000)
    losses[7_777] = 9.0  # one diverging step
    append_losses(run, losses)
    loss = series.run_series(run, ["loss"])["series"]["loss"]
    assert loss["downsampled"] and loss["total"] == 12_000
    assert len(loss["points"]["value"]) <= series.MAX_POINTS
    assert 9.0 in loss["points"]["value"]
    assert loss["points"]["step"][0] == 1 and loss["points"]["step"][-1] == 12_000


def test_it_refetches_a_small_range_at_full_resolution(run):
    append_losses(run, np.linspace(2.0, 0.1, 12_000))
    ranged = series.run_series(run, ["loss"], start=5_000, end=5_999)["series"]["loss"]
    steps = ranged["points"]["step"]
    # Every point of the range, plus one neighbour on each side so the line reaches the edges.
    assert not ranged["downsampled"] and steps == list(map(float, range(4_999, 6_001)))
    wider = series.run_series(run, ["loss"], start=1_000, end=9_000, points=500)["series"]["loss"]
    assert wider["downsampled"] and len(wider["points"]["step"]) <= 500
    assert min(wider["points"]["step"]) == 999 and max(wider["points"]["step"]) == 9_001


def test_it_cuts_ranges_on_any_axis(run):
    append_losses(run, np.linspace(2.0, 0.1, 1_000))
    by_images = series.run_series(run, ["loss"], x="images", start=3_200, end=6_400)["series"]["loss"]
    assert by_images["points"]["step"][1] == 100 and by_images["points"]["step"][-2] == 200
    by_time = series.run_series(run, ["loss"], x="time", start=1_500, end=1_510)["series"]["loss"]
    assert by_time["points"]["step"] == list(map(float, range(499, 512)))


def test_it_flattens_per_gpu_system_samples():
    flat = series.flatten(
        {
            "host_cpu_percent": 12.5,
            "images_seen": 64,
            "gpus": [{"index": 3, "name": "H100", "simulated": False, "utilization_percent": 97, "memory_used_mb": 1}],
        }
    )
    assert flat == {"host_cpu_percent": 12.5, "gpu3_utilization_percent": 97.0, "gpu3_memory_used_mb": 1.0}


def test_it_sends_system_samples_to_pages_already_flat(run):
    sample = {"type": "system", "time": 1.0, "host_cpu_percent": 5, "gpus": [{"index": 1, "utilization_percent": 80}]}
    (row,) = run_events_append(run_id=run.pk, events=[sample])
    live = series.event_payload(row)  # what publish_run_events sends
    (replayed,) = [e for e in series.replay_message(run, since=0)["events"] if e["type"] == "system"]
    for payload in (live, replayed):
        assert "gpus" not in payload
        assert payload["gpu1_utilization_percent"] == 80.0 and payload["host_cpu_percent"] == 5.0


def test_it_replays_in_full_when_short_and_as_downsampled_series_when_long(run):
    append_losses(run, np.linspace(2, 1, 50))
    run_events_append(run_id=run.pk, events=[{"type": "log", "line": f"line {i}"} for i in range(300)])
    short = series.replay_message(run, since=0)
    assert not short["downsampled"]
    kinds = [event["type"] for event in short["events"]]
    assert kinds.count("metrics") == 50 and kinds.count("log") == series.LOG_TAIL and kinds.count("status") == 1
    assert [e["seq"] for e in short["events"]] == sorted(e["seq"] for e in short["events"])
    after = series.replay_message(run, since=short["last_seq"] - 310)
    assert [e["seq"] for e in after["events"] if e["type"] == "metrics"] == list(range(42, 52))

    append_losses(run, np.linspace(1, 0.5, series.REPLAY_FULL_LIMIT + 1))
    long = series.replay_message(run, since=0)
    assert long["downsampled"] and not any(e["type"] == "metrics" for e in long["events"])
    loss = long["series"]["loss"]
    assert loss["total"] == series.REPLAY_FULL_LIMIT + 51 and len(loss["points"]["seq"]) <= series.MAX_POINTS
    assert long["last_seq"] == Run.objects.get(pk=run.pk).last_seq


def test_it_starts_a_new_process_from_the_snapshot_and_reads_only_newer_rows(run, monkeypatch):
    monkeypatch.setattr(series, "SNAPSHOT_ROWS", 1000)
    append_losses(run, np.linspace(2, 1, 1500))
    run_events_append(run_id=run.pk, events=[{"type": "validation", "time": 2.0, "step": 1500, "top1": 0.7}])
    first = series.run_series(run, ["loss", "top1"])
    assert (run.run_dir / series.SNAPSHOT_NAME).is_file()
    append_losses(run, [0.5])  # step 1 again, a later row: the snapshot does not have it
    series.forget(run.pk)  # as a new daphne process would start
    with CaptureQueriesContext(connection) as queries:
        second = series.run_series(run, ["loss", "top1"])
    assert len(queries) == 1 and f'"seq" > {first["last_seq"]}' in queries[0]["sql"]
    assert second["series"]["loss"]["points"]["value"] == first["series"]["loss"]["points"]["value"] + [0.5]
    assert second["series"]["top1"]["points"]["images"] == [1500 * 32.0]


def test_it_leaves_a_snapshot_of_every_event_and_keeps_no_columns(run):
    # The worker's call (while a run trains and when it ends): below SNAPSHOT_ROWS too.
    append_losses(run, np.linspace(2, 1, 300))
    series.leave_snapshot(run)
    assert run.pk not in series._cache
    with CaptureQueriesContext(connection) as queries:
        loss = series.run_series(run, ["loss"])["series"]["loss"]
    assert f'"seq" > {Run.objects.get(pk=run.pk).last_seq}' in queries[0]["sql"]  # nothing left to read
    assert loss["total"] == 300 and loss["points"]["value"][-1] == 1.0


def test_it_downsamples_a_window_of_sequence_numbers_like_the_whole_series(run):
    append_losses(run, np.sin(np.linspace(0, 60, 12_000)))
    columns = series.read_columns(run)
    whole = series.series_points(columns, "loss", points=500)
    window = series.series_points(columns, "loss", points=500, after_seq=4001, until_seq=9001)
    assert whole["total"] == 12_000 and window["total"] == 5000
    assert window["points"]["seq"][0] == 4002 and window["points"]["seq"][-1] == 9001
    assert len(window["points"]["seq"]) <= 500 and min(window["points"]["value"]) < -0.99


def test_it_ignores_a_snapshot_of_another_run_with_the_same_id(run, monkeypatch):
    monkeypatch.setattr(series, "SNAPSHOT_ROWS", 10)
    append_losses(run, [3.0] * 20)
    series.run_series(run)
    Run.objects.filter(pk=run.pk).update(created_at=run.created_at.replace(year=2020))
    run.refresh_from_db()
    series.forget(run.pk)
    with CaptureQueriesContext(connection) as queries:
        assert series.run_series(run, ["loss"])["series"]["loss"]["total"] == 20
    assert '"seq" > 0' in queries[0]["sql"]  # read from the start, not from the snapshot
