"""Asking for Slurm: one rule for the form, the API and the CLI; the job's script and options."""

from __future__ import annotations

import time

import pytest
from django.core.management import CommandError, call_command

from tests.workbench.runs.conftest import TINY_CONFIG
from workbench.core.errors import RequestError
from workbench.runs import slurm_status
from workbench.runs.executors.slurm import jobs as slurm_jobs
from workbench.runs.models import Run
from workbench.runs.services import run_submit


@pytest.fixture
def slurm_on(settings):
    settings.SLURM_ENABLED = True
    settings.SLURM_PARTITION = "gpu"
    settings.SIMULATED_GPUS = 0


def test_it_refuses_slurm_where_it_is_not_enabled(db, owner, make_dataset, owner_client):
    dataset = make_dataset(owner)
    with pytest.raises(RequestError, match="Slurm is not enabled"):
        run_submit(owner=owner, dataset=dataset, name="", network="lenet", config=TINY_CONFIG, executor="slurm")
    body = {"dataset": dataset.pk, "network": "lenet", "executor": "local", "nodes": 2, "config": TINY_CONFIG}
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"nodes": ["a run over several nodes needs the Slurm executor"]}
    with pytest.raises(CommandError, match="executor: Slurm is not enabled"):
        call_command("train", dataset=dataset.pk, network="lenet", epochs=1, batch_size=8, executor="slurm")


def test_it_checks_the_batch_against_every_process_of_every_node(db, owner, make_dataset, owner_client, slurm_on):
    dataset = make_dataset(owner)
    body = {"dataset": dataset.pk, "network": "lenet", "executor": "slurm", "nodes": 3, "gpus": "2"}
    body["config"] = {**TINY_CONFIG, "batch_size": 8}
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "config": [
            "batch_size: 8 is not divisible by the 6 processes (3 nodes x 2); "
            "the batch is split evenly over them: try 6"
        ]
    }
    body["gpus"] = "host:0,1"
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.json() == {"gpus": ["Slurm chooses the GPUs; ask for a number of GPUs per node, or cpu"]}
    body.update(gpus="2", nodes=2)
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert (created["executor"], created["nodes"], created["requested_devices"]) == ("slurm", 2, "2 nodes x 2 GPUs")


def test_it_writes_a_batch_script_that_spans_the_nodes(db, owner, make_dataset, slurm_on, settings):
    settings.SLURM_ACCOUNT = "lab42"
    settings.SLURM_SBATCH_OPTIONS = "--time=1-00:00:00 --qos=normal"
    run = run_submit(
        owner=owner, dataset=make_dataset(owner), name="big", network="lenet", config=TINY_CONFIG, gpus="4",
        executor="slurm", nodes=2,
    )  # fmt: skip
    options = slurm_jobs.sbatch_options(run, 1)
    assert f"--job-name=wb-run{run.pk}-a1" in options
    for expected in ("--partition=gpu", "--nodes=2", "--ntasks-per-node=1", "--gres=gpu:4", "--requeue"):
        assert expected in options
    assert options[-3:] == ["--account=lab42", "--time=1-00:00:00", "--qos=normal"]
    script = slurm_jobs.batch_script(run, 1, "launch-1.json")
    assert "srun --ntasks-per-node=1 --kill-on-bad-exit=1" in script
    assert '--events "events-$attempt.jsonl" --placement-from-environment $resume' in script
    # Each node's trainer starts through its system sampler (no workbench worker runs there).
    every = settings.SYSTEM_SAMPLE_SECONDS
    assert f'-m trainer.system_samples --every {every} --gpus 4 --out "system-$attempt.jsonl" -- ' in script
    assert "#SBATCH --nodes=2" in script
    config = slurm_jobs.slurm_trainer_config(run)
    assert (config["devices"], config["nodes"]) == ([0, 1, 2, 3], 2)  # real GPUs: CUDA indices
    settings.SIMULATED_GPUS = 2
    assert slurm_jobs.slurm_trainer_config(run)["devices"] == ["cpu"] * 4  # simulated: gloo on the CPU
    assert slurm_status.parse_job_name(f"wb-run{run.pk}-a3") == (run.pk, 3)
    assert slurm_status.parse_job_name(f"other-run{run.pk}-a3") is None


def test_it_shows_the_partition_and_who_holds_it_on_the_gpus_page(
    db, owner, other_user, make_dataset, client, slurm_on
):
    from django.core.cache import cache

    from workbench.runs.slurm_status import PARTITION_KEY, STATUS_KEY

    mine = run_submit(
        owner=owner, dataset=make_dataset(owner), name="mine", network="lenet", config=TINY_CONFIG, executor="slurm"
    )
    theirs = run_submit(
        owner=other_user, dataset=make_dataset(other_user), name="zq-secret-run", network="lenet", config=TINY_CONFIG,
        executor="slurm",
    )  # fmt: skip
    nodes = [
        {"name": f"n{i}", "state": "mixed", "gpus": 2, "gpus_used": 1, "cpus": "1/3/0/4", "reason": ""} for i in (1, 2)
    ]
    jobs = [
        ["31", f"wb-run{mine.pk}-a1", "wb", "n1"],
        ["32", f"wb-run{theirs.pk}-a1", "wb", "n2"],
        ["33", "zq-job-name", "zq-slurm-user", "n2"],
    ]
    cache.set(PARTITION_KEY, {"nodes": nodes, "jobs": jobs, "at": time.time()})
    cache.set(
        STATUS_KEY, {"answers": False, "message": "the Slurm controller does not answer (connect failure)", "at": 0}
    )
    client.force_login(owner)
    page = client.get("/gpus/").content.decode()
    assert "Slurm partition gpu" in page and "controller does not answer" in page
    assert f"run #{mine.pk} (Slurm job 31)" in page
    assert "another user&#x27;s run; Slurm job 33 (not the workbench&#x27;s)" in page
    assert "zq-" not in page
    cache.delete(PARTITION_KEY)
    cache.delete(STATUS_KEY)


def test_it_offers_slurm_in_the_new_run_form_only_when_enabled(db, owner, make_dataset, owner_client, settings):
    make_dataset(owner)
    assert 'name="executor"' not in owner_client.get("/runs/new/").content.decode()
    settings.SLURM_ENABLED, settings.SLURM_PARTITION = True, "gpu"
    page = owner_client.get("/runs/new/").content.decode()
    assert 'name="executor"' in page and 'name="nodes"' in page
    assert Run.objects.count() == 0


def test_it_lists_runs_waiting_in_slurm_apart_from_the_workbench_queue(db, owner, make_dataset, owner_client, slurm_on):
    dataset = make_dataset(owner)
    on_slurm = run_submit(
        owner=owner, dataset=dataset, name="big", network="lenet", config=TINY_CONFIG, executor="slurm"
    )
    Run.objects.filter(pk=on_slurm.pk).update(
        state=Run.State.WAITING, slurm_job_id="41", wait_reason="Slurm job 41: waiting for … (Slurm: Resources)"
    )
    local = run_submit(owner=owner, dataset=dataset, name="small", network="lenet", config=TINY_CONFIG, gpus="cpu")
    rows = owner_client.get("/api/queue/").json()["queue"]
    assert [(row["id"], row["position"], row["executor"]) for row in rows] == [
        (local.pk, 1, "local"),
        (on_slurm.pk, None, "slurm"),
    ]
    assert rows[1]["wait_reason"] == "Slurm job 41: waiting for … (Slurm: Resources)"
    page = owner_client.get("/runs/queue/").content.decode()
    assert "Slurm job 41: waiting for" in page and "the Slurm cluster's queue, in Slurm's order" in page
