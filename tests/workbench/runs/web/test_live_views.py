"""The run page, the series endpoints (ranges, downloads) and the comparison page."""

import csv
import io
import json

import numpy as np
import pytest

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from workbench.runs import series
from workbench.runs.lifecycle import run_events_append
from workbench.runs.models import Run
from workbench.runs.services import run_create


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner, status=Dataset.Status.BUILDING)  # unschedulable


def make_run(owner, dataset, *, name="r", batch_size=32, lr=0.1) -> Run:
    config = {"batch_size": batch_size, "solver": {"optimizer": "sgd", "base_lr": lr}}
    run = run_create(
        owner=owner, dataset=dataset, name=name, network="lenet", config=config, device_request={"kind": "cpu"}
    )
    series.forget(run.pk)
    return run


def append_training(run: Run, steps: int, *, batch_size: int = 32) -> None:
    events = []
    for step in range(1, steps + 1):
        events.append(
            {"type": "metrics", "time": 1000.0 + step, "step": step, "epoch": step / 100,
             "images_seen": step * batch_size, "loss": 2.0 / step, "lr": 0.1, "images_per_sec": 500.0,
             "data_wait_share": 0.1}
        )  # fmt: skip
        if step % 100 == 0:
            events.append({"type": "validation", "time": 1000.5 + step, "step": step, "epoch": step / 100,
                           "val_loss": 1.0 / step, "top1": step / (steps + 1)})  # fmt: skip
    run_events_append(run_id=run.pk, events=events)


@pytest.fixture
def run(owner, dataset):
    run = make_run(owner, dataset)
    append_training(run, 300)
    return run


def test_it_shows_the_run_page_with_its_header_and_charts(owner_client, run):
    response = owner_client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    needles = ['id="run-state"', 'data-chart="loss"', 'data-chart="gpu"', "vendor/plotly-gl2d.min.js"]
    needles += ["runs/run_detail.js", 'rel="modulepreload"', "window.earlyRunSocket"]
    needles += ['id="run-log"', 'id="run-timeline"', "lenet", "batch 32", "lr 0.1", "series.csv", "series.json"]
    for needle in needles:
        assert needle in html, needle
    page = json.loads(html.split('id="run-page" type="application/json">')[1].split("</script>")[0])
    assert page["socket_path"] == f"/ws/runs/{run.pk}/" and page["state"] == "queued"
    assert page["abort_url"] == f"/api/runs/{run.pk}/abort/"


def test_it_hides_other_users_runs_behind_the_same_404(client, other_user, run):
    client.force_login(other_user)
    for path in ("", "series/", "series.csv", "series.json"):
        assert client.get(f"/runs/{run.pk}/{path}").status_code == 404
    assert client.get(f"/runs/{run.pk + 999}/").status_code == 404


def test_it_lets_staff_see_any_run(client, staff_user, run):
    client.force_login(staff_user)
    assert client.get(f"/runs/{run.pk}/").status_code == 200


def test_it_requires_login(client, run):
    response = client.get(f"/runs/{run.pk}/series/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_serves_a_range_of_named_series(owner_client, run):
    response = owner_client.get(f"/runs/{run.pk}/series/", {"name": ["loss", "top1"], "x": "step", "start": 10,
                                                             "end": 20})  # fmt: skip
    data = response.json()
    assert set(data["series"]) == {"loss", "top1"} and data["last_seq"] == Run.objects.get(pk=run.pk).last_seq
    assert data["series"]["loss"]["points"]["step"] == list(map(float, range(9, 22)))
    # top1 exists only at steps 100, 200, 300: the range has none; the next one carries the line.
    assert data["series"]["top1"]["points"]["step"] == [100.0]
    between = owner_client.get(f"/runs/{run.pk}/series/", {"name": "top1", "start": 150, "end": 160}).json()
    assert between["series"]["top1"]["points"]["step"] == [100.0, 200.0]


def test_it_downsamples_long_series_and_refines_zoomed_ranges(owner_client, owner, dataset):
    run = make_run(owner, dataset)
    append_training(run, 9000)
    whole = owner_client.get(f"/runs/{run.pk}/series/", {"name": "loss", "points": 1000}).json()["series"]["loss"]
    assert whole["downsampled"] and len(whole["points"]["value"]) <= 1000 and whole["total"] == 9000
    zoomed = owner_client.get(f"/runs/{run.pk}/series/", {"name": "loss", "start": 4000, "end": 4500}).json()
    assert not zoomed["series"]["loss"]["downsampled"] and len(zoomed["series"]["loss"]["points"]["value"]) == 503


@pytest.mark.parametrize(
    "query, message",
    [({"x": "wall"}, "x must be one of"), ({"start": "soon"}, "start and end"), ({"points": "1"}, "points must"),
     ({"end": "nan"}, "start and end")],
)  # fmt: skip
def test_it_names_the_bad_parameter(owner_client, run, query, message):
    response = owner_client.get(f"/runs/{run.pk}/series/", query)
    assert response.status_code == 400 and message in response.content.decode()


def test_it_downloads_every_point_as_csv(owner_client, run):
    response = owner_client.get(f"/runs/{run.pk}/series.csv")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-series.csv"'
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    metrics = [row for row in rows if row["kind"] == "metrics"]
    assert len(metrics) == 300 and len(rows) == 303
    assert metrics[9]["step"] == "10" and float(metrics[9]["loss"]) == 0.2 and metrics[9]["images_seen"] == "320"
    validation = [row for row in rows if row["kind"] == "validation"]
    assert validation[0]["top1"] and validation[0]["loss"] == "" and validation[0]["images_seen"] == "3200.0"


def test_it_downloads_every_point_as_json(owner_client, owner, dataset):
    run = make_run(owner, dataset)
    append_training(run, 6000)
    response = owner_client.get(f"/runs/{run.pk}/series.json")
    data = json.loads(response.content)
    assert response["Content-Disposition"].endswith('series.json"')
    loss = data["series"]["loss"]
    assert not loss["downsampled"] and loss["points"]["value"] == [2.0 / step for step in range(1, 6001)]
    assert data["settings"]["batch_size"] == 32


def test_it_lists_only_the_users_runs_on_the_compare_page(owner_client, owner, other_user, dataset):
    mine = make_run(owner, dataset, name="mine")
    make_dataset_row(other_user, name="theirs")
    theirs = make_run(other_user, Dataset.objects.get(name="theirs"), name="theirs")
    html = owner_client.get("/runs/compare/").content.decode()
    assert f"mine (#{mine.pk}: lenet, batch 32, lr 0.1)" in html and "theirs" not in html
    refused = owner_client.get("/runs/compare/", {"runs": [mine.pk, theirs.pk]}).content.decode()
    assert "compare-page" not in refused and "Select a valid choice" in refused


def test_it_overlays_one_series_of_several_runs(owner_client, owner, dataset):
    small = make_run(owner, dataset, name="small", batch_size=16, lr=0.05)
    large = make_run(owner, dataset, name="large", batch_size=64, lr=0.2)
    append_training(small, 200, batch_size=16)
    append_training(large, 100, batch_size=64)
    page = owner_client.get("/runs/compare/", {"runs": [small.pk, large.pk], "name": "loss", "x": "images"})
    assert 'id="compare-page"' in page.content.decode()
    data = owner_client.get(
        "/runs/compare/series/", {"runs": f"{small.pk},{large.pk}", "name": "loss", "x": "images"}
    ).json()
    assert [run["label"] for run in data["runs"]] == [
        f"small (#{small.pk}: lenet, batch 16, lr 0.05)",
        f"large (#{large.pk}: lenet, batch 64, lr 0.2)",
    ]
    # Images seen put both runs on one scale: 3,200 images at the end of each.
    assert [run["series"]["points"]["images"][-1] for run in data["runs"]] == [3200.0, 6400.0]
    # The grid's one request: several series per run, by name (none for a series a run lacks).
    both = owner_client.get("/runs/compare/series/", {"runs": small.pk, "name": "loss,map", "x": "step"}).json()
    assert both["runs"][0]["series_by_name"]["loss"] == both["runs"][0]["series"]
    assert both["runs"][0]["series_by_name"]["map"] is None


def test_it_takes_comma_separated_run_ids_from_the_runs_list(owner_client, owner, dataset):
    first, second = make_run(owner, dataset, name="a"), make_run(owner, dataset, name="b")
    html = owner_client.get("/runs/compare/", {"runs": f"{second.pk},{first.pk}"}).content.decode()
    page = json.loads(html.split('id="compare-page" type="application/json">')[1].split("</script>")[0])
    assert page["runs"] == [first.pk, second.pk] and page["x"] == "step"
    assert page["names"][:3] == ["loss", "val_loss", "top1"]  # the grid of every series, by default


def test_it_refuses_to_compare_runs_of_others(client, other_user, run):
    client.force_login(other_user)
    response = client.get("/runs/compare/series/", {"runs": run.pk, "name": "loss"})
    assert response.status_code == 404


def test_it_keeps_peaks_in_the_compare_series(owner_client, owner, dataset):
    run = make_run(owner, dataset)
    losses = np.full(10_000, 0.5)
    losses[6_543] = 7.0
    run_events_append(
        run_id=run.pk,
        events=[{"type": "metrics", "time": float(i), "step": i + 1, "epoch": i / 1e3, "loss": float(v)}
                for i, v in enumerate(losses)],
    )  # fmt: skip
    data = owner_client.get("/runs/compare/series/", {"runs": run.pk, "name": "loss"}).json()
    assert 7.0 in data["runs"][0]["series"]["points"]["value"]


def early_stopped(run: Run) -> Run:
    """`run` ended by early stopping at epoch 8 of 30, keeping best.pt from epoch 8 at 96.40 %,
    while the rule's own best (moved only by more than the delta) was 95.51 % at epoch 6."""
    validations = [(6, 0.9551), (7, 0.9590), (8, 0.9640)]
    events = [
        {"type": "validation", "time": 2000.0 + e, "step": 100 * e, "epoch": e, "top1": v} for e, v in validations
    ]
    events.append({"type": "progress", "time": 2009.0, "percent": 26.7, "eta_seconds": 60, "elapsed": 30, "step": 800})
    message = "stopped early at epoch 8 of 30: top1 has not improved by more than 0.01 for 2 validations"
    events.append(
        {"type": "status", "time": 2010.0, "state": "done", "message": message, "exit_code": 0, "step": 800,
         "early_stopped": True, "stopped_epoch": 8, "epochs": 30, "best_metric": "top1", "best": 0.964,
         "best_epoch": 8}
    )  # fmt: skip
    run_events_append(run_id=run.pk, events=events)
    Run.objects.filter(pk=run.pk).update(state=Run.State.DONE, progress=1.0, config={**run.config, "epochs": 30})
    return run


def test_it_shows_where_an_early_stopped_run_stopped_what_ran_and_the_one_best_it_kept(owner_client, owner, dataset):
    run = early_stopped(make_run(owner, dataset))
    html = owner_client.get(f"/runs/{run.pk}/").content.decode()
    assert '<dd id="run-epoch">stopped early at epoch 8 of 30</dd>' in html
    assert '<span id="run-percent">27%</span>' in html  # 8 of 30 epochs ran; the row says 100 % (done)
    assert '<dd id="run-best">top-1 96.40% at epoch 8 (kept)</dd>' in html
    page = json.loads(html.split('id="run-page" type="application/json">')[1].split("</script>")[0])
    assert page["early_stop"] == {
        "epoch": 8, "epochs": 30, "progress": 8 / 30, "metric": "top1", "best": 0.964, "best_epoch": 8,
        "best_weights": "raw",  # without an average, the raw weights are all a checkpoint holds
    }  # fmt: skip


@pytest.mark.parametrize(
    "query, message",
    [({"runs": "9" * 400}, "runs must be a whole number"), ({"runs": "1", "points": "9" * 400}, "points must"),
     ({"runs": "1", "start": "1" + "0" * 399}, "start and end")],
)  # fmt: skip
def test_it_answers_huge_numbers_in_the_compare_series_with_a_400_naming_them(owner_client, run, query, message):
    response = owner_client.get("/runs/compare/series/", query)
    assert response.status_code == 400 and message in response.content.decode()
