"""Runs through a real worker: queued, started on the CPU, trained by the real trainer, done."""

import pytest

from tests.support.waiting import wait_for_state
from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.runs import series
from workbench.runs.models import Run
from workbench.runs.services import run_submit
from workbench.workers.models import Device

pytestmark = [pytest.mark.slow]


def test_it_trains_a_run_on_the_cpu_to_done(celery_worker, transactional_db, owner, make_dataset):
    dataset = make_dataset(owner)
    run = run_submit(owner=owner, dataset=dataset, name="tiny", network="lenet", config=TINY_CONFIG, gpus="cpu")
    wait_for_state(run, Run.State.DONE, Run.State.FAILED, timeout=180)
    assert run.state == Run.State.DONE, run.error + run.log_path.read_text()[-2000:]
    assert [t.to_state for t in run.transitions.all() if t.to_state != "waiting"] == ["queued", "running", "done"]
    steps = list(run.events.filter(kind="metrics").values_list("step", flat=True))
    assert steps == sorted(set(steps)) and len(steps) >= 4
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert run.events.filter(kind="validation").exists()
    assert run.progress == 1.0
    assert not Device.objects.filter(run=run).exists()
    assert (run.run_dir / "trainer.log").exists()
    # The worker left the series snapshot of every series event: a new daphne starts from it.
    snapshot = series.RunColumns(run_id=run.pk, created=run.created_at.timestamp())
    series.load_snapshot(run, snapshot)
    assert snapshot.last_seq == max(run.events.filter(kind__in=series.SERIES_KINDS).values_list("seq", flat=True))


def test_it_waits_on_the_command_line_until_done(celery_worker, transactional_db, owner, make_dataset, tmp_path):
    import io
    import json

    from django.core.management import call_command

    dataset = make_dataset(owner)
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"data": {"num_workers": 0}, "metrics_interval": 1}))
    out = io.StringIO()
    call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "1", "--batch-size", "8",
                 "--gpus", "cpu", "--config", str(extra), "--wait", stdout=out)  # fmt: skip
    lines = out.getvalue().splitlines()
    run_id = int(lines[0])
    assert lines[-1].startswith(f"run {run_id}: done — finished 3 steps (1.00 epochs), val top-1 "), lines[-1]
    assert any(line.startswith(f"run {run_id}: running") for line in lines)


def test_it_records_system_samples_beside_the_trainer(celery_worker, transactional_db, owner, make_dataset, settings):
    dataset = make_dataset(owner, train=96)
    config = {**TINY_CONFIG, "epochs": 30}
    run = run_submit(owner=owner, dataset=dataset, name="sampled", network="lenet", config=config, gpus="cpu")
    wait_for_state(run, Run.State.DONE, Run.State.FAILED, timeout=180)
    assert run.state == Run.State.DONE, run.error
    samples = list(run.events.filter(kind="system"))
    assert samples, "no system event while the run trained"
    assert samples[0].data["host_cpu_percent"] is not None
    assert samples[0].data["process_count"] >= 1
