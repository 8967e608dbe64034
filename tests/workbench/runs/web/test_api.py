"""The runs REST API and the management commands (no worker: runs stay queued)."""

import html
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from trainer.config import DataConfig, SolverConfig, TrainConfig, settings_of
from workbench.runs.models import Run
from workbench.workers.simulation import simulate_hosts


@pytest.fixture
def dataset(owner):
    return make_dataset_row(owner)


def create(client, dataset, **fields):
    body = {"dataset": dataset.pk, "network": "lenet", "epochs": 2, "batch_size": 8, "gpus": "cpu", **fields}
    return client.post(reverse("api-runs"), body, content_type="application/json")


def test_it_creates_a_run_and_shows_its_timeline(owner_client, dataset):
    response = create(owner_client, dataset, lr=0.05, solver="adam", config={"data": {"num_workers": 0}})
    assert response.status_code == 201, response.json()
    run = response.json()
    assert run["state"] == "queued" and run["requested_devices"] == "the CPU"
    # What was sent, and the trainer's defaults for the rest: the settings the run trains with.
    sent = TrainConfig(
        epochs=2, batch_size=8, data=DataConfig(num_workers=0), solver=SolverConfig(optimizer="adam", base_lr=0.05)
    )
    assert run["config"] == settings_of(sent)
    detail = owner_client.get(reverse("api-run", args=[run["id"]])).json()
    assert [t["to_state"] for t in detail["transitions"]] == ["queued"]
    page = owner_client.get(reverse("run-detail", args=[run["id"]])).content.decode()
    assert "batch 8, lr 0.05, adam, 2 epochs" in page  # the stored 2.0, as people write it


def test_it_shows_a_searched_rate_to_four_significant_digits(owner_client, dataset):
    # "Train the best" ran at lr 0.055412664772081566, shown whole in the run's settings.
    run = create(owner_client, dataset, lr=0.055412664772081566, config={"data": {"num_workers": 0}}).json()
    page = owner_client.get(reverse("run-detail", args=[run["id"]])).content.decode()
    assert "batch 8, lr 0.05541, sgd" in page


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"network": "resnet19"}, "network", '"resnet19" is not a valid choice.'),
        ({"gpus": "many"}, "gpus", "'many' is not one of auto, cpu, a count such as 2, or HOST:0,1"),
        # A short field sent beside config is refused under its own key (issue 33), one in config under config.
        ({"batch_size": 7, "gpus": "2"}, "batch_size", "7 is not divisible by the 2 processes"),
        ({"batch_size": 0}, "batch_size", "0 must be a positive integer"),
        ({"lr": -1}, "lr", "-1 must be"),
        ({"config": {"solver": {"momentum": -1}}}, "config", "solver.momentum: -1 must be"),
        ({"config": {"solver": {"lr_policy": "zigzag"}}}, "config", "solver.lr_policy: 'zigzag' is not one of"),
        ({"config": {"devices": ["cpu"]}}, "config", "devices: set by the workbench, leave it out"),
        ({"config": {"model_parallel": 2}, "gpus": "3"}, "config", "model_parallel: 3 GPU(s) cannot form groups of 2"),
        ({"config": {"model_parallel": 2}, "gpus": "cpu"}, "config", "model_parallel: splitting the network needs"),
        ({"config": {"model_parallel": "two"}, "gpus": "2"}, "config", "model_parallel: 'two' must be a positive"),
    ],
)
def test_it_refuses_bad_requests_naming_the_field(owner_client, dataset, fields, field, message):
    response = create(owner_client, dataset, **fields)
    assert response.status_code == 400
    assert message in " ".join(response.json()[field])
    assert not Run.objects.exists()


def test_it_refuses_a_failed_dataset(owner_client, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.FAILED)
    response = create(owner_client, dataset)
    assert response.status_code == 400
    assert "is failed; build it again" in response.json()["dataset"][0]


def test_it_hides_other_users_runs_with_the_same_404(client, owner_client, other_user, dataset):
    run_id = create(owner_client, dataset).json()["id"]
    client.force_login(other_user)
    missing = client.get(reverse("api-run", args=[run_id + 1000]))
    foreign = client.get(reverse("api-run", args=[run_id]))
    assert missing.status_code == foreign.status_code == 404
    assert missing.json() == foreign.json()
    assert client.post(reverse("api-run-abort", args=[run_id])).status_code == 404
    assert client.get(reverse("api-runs")).json()["results"] == []
    assert create(client, dataset).status_code == 400  # not their dataset either


def test_it_aborts_a_queued_run(owner_client, dataset):
    run_id = create(owner_client, dataset).json()["id"]
    response = owner_client.post(reverse("api-run-abort", args=[run_id]))
    assert response.json()["state"] == "aborted"
    again = owner_client.post(reverse("api-run-abort", args=[run_id]))
    assert again.status_code == 409 and "cannot be aborted" in again.json()["detail"]


def test_it_lets_only_staff_set_priorities(owner_client, client, staff_user, dataset):
    assert create(owner_client, dataset, priority=5).status_code == 403
    run_id = create(owner_client, dataset).json()["id"]
    assert (
        owner_client.patch(
            reverse("api-run", args=[run_id]), {"priority": 9}, content_type="application/json"
        ).status_code
        == 403
    )
    client.force_login(staff_user)
    response = client.patch(reverse("api-run", args=[run_id]), {"priority": 9}, content_type="application/json")
    assert response.json()["priority"] == 9


def test_it_shows_the_queue_with_positions_and_reasons(owner_client, client, owner, other_user, dataset):
    simulate_hosts(hosts=1, gpus_per_host=1)
    create(owner_client, dataset, gpus="4", batch_size=8)
    queue = owner_client.get(reverse("api-queue")).json()["queue"]
    from workbench.runs.scheduler import schedule

    schedule()
    queue = owner_client.get(reverse("api-queue")).json()["queue"]
    assert queue[0]["position"] == 1
    assert queue[0]["wait_reason"] == "needs 4 GPUs on one host; the largest online host has 1"
    client.force_login(other_user)
    hidden = client.get(reverse("api-queue")).json()["queue"][0]
    assert hidden["name"] == "another user's run" and hidden["id"] is None
    link = f'href="{reverse("run-detail", args=[queue[0]["id"]])}"'
    page = client.get(reverse("run-queue")).content.decode()
    assert "needs 4 GPUs on one host" in page and link not in page  # bob: no link to alice's run
    client.force_login(owner)
    page = client.get(reverse("run-queue")).content.decode()
    assert link in page  # alice's own row links to her run
    assert "not known yet" in page and "–" not in page  # no host can hold it: no estimate, said in words


def test_it_lists_gpus_with_their_holder(owner_client, dataset):
    simulate_hosts(hosts=1, gpus_per_host=2)
    create(owner_client, dataset, gpus="1", name="holder")
    from workbench.runs.scheduler import schedule

    schedule()
    hosts = owner_client.get(reverse("api-gpus")).json()["hosts"]
    gpus = [d for d in hosts[0]["devices"] if d["kind"] == "gpu"]
    assert [d["in_use"] for d in gpus] == [True, False]
    assert gpus[0]["run"]["name"] == "holder" and gpus[0]["simulated"] is True


def test_it_filters_the_runs_page(owner_client, dataset):
    # Names no page's own words hold (the shortcuts list says "the first is 'Skip to content'").
    create(owner_client, dataset, name="kept-queued")
    second = create(owner_client, dataset, name="was-aborted").json()["id"]
    owner_client.post(reverse("api-run-abort", args=[second]))
    body = owner_client.get(reverse("run-list"), {"state": "aborted"}).content.decode()
    assert "was-aborted" in body and "kept-queued" not in body


def test_it_queues_a_run_from_the_command_line(owner, dataset):
    out = io.StringIO()
    call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "1", "--batch-size", "4",
                 "--gpus", "cpu", "--lr", "0.1", stdout=out)  # fmt: skip
    run = Run.objects.get(pk=int(out.getvalue()))
    assert run.owner == owner and run.config["solver"]["base_lr"] == 0.1
    call_command("abort_run", str(run.pk), stdout=out)
    run.refresh_from_db()
    assert run.state == Run.State.ABORTED


def test_it_names_the_problem_on_the_command_line(dataset):
    with pytest.raises(CommandError, match="no dataset with id 999"):
        call_command("train", "--dataset", "999", "--network", "lenet", "--epochs", "1", "--batch-size", "4")
    with pytest.raises(CommandError, match="gpus: 'x:y' is not one of"):
        call_command("train", "--dataset", str(dataset.pk), "--network", "lenet", "--epochs", "1",
                     "--batch-size", "4", "--gpus", "x:y")  # fmt: skip
    with pytest.raises(CommandError, match="no run with id 424242"):
        call_command("abort_run", "424242")


def test_it_deletes_a_finished_run_with_its_files(owner_client, dataset, django_capture_on_commit_callbacks):
    run_id = create(owner_client, dataset).json()["id"]
    owner_client.post(reverse("api-run-abort", args=[run_id]))
    run_dir = Run.objects.get(pk=run_id).run_dir
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "best.pt").write_bytes(b"weights")
    # An inference job's rows go by cascade, and the inference app removes its files.
    from workbench.inference.models import InferenceJob

    run = Run.objects.get(pk=run_id)
    job = InferenceJob.objects.create(owner=run.owner, run=run, kind="test", source="val", state="done")
    # Ids come back after a rolled-back test: a folder of an earlier job of the same id may be there.
    (job.folder / "out").mkdir(parents=True, exist_ok=True)
    (job.folder / "out" / "result.json").write_text("{}")
    with django_capture_on_commit_callbacks(execute=True):
        assert owner_client.delete(reverse("api-run", args=[run_id])).status_code == 204
    assert not Run.objects.filter(pk=run_id).exists() and not InferenceJob.objects.filter(pk=job.pk).exists()
    assert not run_dir.exists() and not job.folder.exists()


def test_it_refuses_to_delete_a_running_run(owner_client, dataset):
    simulate_hosts(hosts=1, gpus_per_host=1)
    run_id = create(owner_client, dataset, gpus="1").json()["id"]
    from workbench.runs.scheduler import schedule

    schedule()
    response = owner_client.delete(reverse("api-run", args=[run_id]))
    assert response.status_code == 409 and "abort it first" in response.json()["detail"]


def test_it_links_the_dataset_page_to_its_runs_and_a_new_run(owner_client, dataset):
    run_id = create(owner_client, dataset, name="linked").json()["id"]
    body = owner_client.get(reverse("dataset-detail", args=[dataset.pk])).content.decode()
    assert f'href="{reverse("run-detail", args=[run_id])}"' in body
    assert f'href="{reverse("run-new")}?dataset={dataset.pk}"' in body


def test_it_shows_another_users_run_in_every_wait_reason(client, owner, other_user, staff_user, dataset):
    from workbench.runs.scheduler import schedule
    from workbench.runs.services import run_create

    (host,) = simulate_hosts(hosts=1, gpus_per_host=1)
    specific = {"kind": "specific", "host": host.hostname, "indices": [0]}
    holder = run_create(owner=owner, dataset=dataset, name="alice-secret-project-x", network="lenet", config={},
                        device_request=specific)  # fmt: skip
    bobs = make_dataset_row(other_user, name="bobs")
    waiting = run_create(owner=other_user, dataset=bobs, name="bobs-run", network="lenet", config={},
                         device_request=specific)  # fmt: skip
    schedule()
    hidden = f"GPU 0 on {host.hostname} is in use by another user's run"
    shown = f"GPU 0 on {host.hostname} is in use by run #{holder.pk} (alice-secret-project-x)"

    def seen_by(user) -> tuple[str, str | None, str | None, str]:
        client.force_login(user)
        queue = client.get(reverse("api-queue")).json()["queue"]
        (row,) = [row for row in queue if row["state"] == "waiting"]
        detail = client.get(reverse("api-run", args=[waiting.pk]))
        listed = [r["wait_reason"] for r in client.get(reverse("api-runs")).json()["results"] if r["id"] == waiting.pk]
        page = client.get(reverse("run-queue")).content.decode()
        return row["wait_reason"], detail.json().get("wait_reason"), (listed or [None])[0], page

    bob_queue, bob_detail, bob_list, bob_page = seen_by(other_user)
    assert (bob_queue, bob_detail, bob_list) == (hidden, hidden, hidden)
    assert html.escape(hidden) in bob_page and "alice-secret" not in bob_page
    assert "alice-secret" not in client.get(reverse("api-run", args=[waiting.pk])).content.decode()
    # The holder's owner and staff may see the holder: they read its number and name.
    alice_queue, _, _, alice_page = seen_by(owner)
    assert alice_queue == shown and html.escape(shown) in alice_page
    staff_queue, staff_detail, staff_list, staff_page = seen_by(staff_user)
    assert (staff_queue, staff_detail, staff_list) == (shown, shown, shown) and html.escape(shown) in staff_page


def sweep(client, dataset, grid, **fields):
    body = {"dataset": dataset.pk, "network": "lenet", "epochs": 1, "gpus": "cpu", "name": "grid", **fields}
    return client.post(reverse("api-sweeps"), {**body, "sweep": grid}, content_type="application/json")


def test_it_creates_a_sweep_of_runs_sharing_its_name(owner_client, dataset, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = sweep(owner_client, dataset, {"lr": [0.1, 0.01], "batch_size": [4, 8]})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["sweep"].startswith("grid · ") and {run["sweep"] for run in body["results"]} == {body["sweep"]}
    got = {(run["name"], run["config"]["solver"]["base_lr"], run["config"]["batch_size"]) for run in body["results"]}
    assert got == {
        ("grid lr=0.1 bs=4", 0.1, 4),
        ("grid lr=0.1 bs=8", 0.1, 8),
        ("grid lr=0.01 bs=4", 0.01, 4),
        ("grid lr=0.01 bs=8", 0.01, 8),
    }
    assert Run.objects.filter(sweep=body["sweep"], state=Run.State.QUEUED).count() == 4
    assert callbacks  # the scheduler hears of the runs once the transaction is committed


@pytest.mark.parametrize(
    ("grid", "fields", "field", "message"),
    [
        ({"batch_size": [8, 7]}, {"gpus": "2"}, "sweep", "batch_size: 7 is not divisible by the 2 processes"),
        ({"lr": [0.1, -1]}, {}, "sweep", "lr: -1 must be a positive number"),
        ({"lr": [0.1, 0.1]}, {}, "sweep", "lr: 0.1 is listed twice"),
        ({"momentum": [0.9]}, {}, "sweep", "momentum: cannot be swept (these can: lr, batch_size, preset)"),
        ({"lr": [0.1]}, {"lr": 0.2}, "lr", "given by the sweep (sweep.lr); leave it out here"),  # the key sent
        ({"lr": [10**-i for i in range(1, 8)], "batch_size": [1, 2, 4, 8, 16]}, {}, "sweep", "makes 35 runs"),
        ({"lr": [0.1, 0.01]}, {"gpus": "many"}, "gpus", "'many' is not one of auto, cpu"),
    ],
)
def test_it_creates_no_run_of_a_sweep_with_a_bad_combination(owner_client, dataset, grid, fields, field, message):
    response = sweep(owner_client, dataset, grid, **{"batch_size": 8, **fields} if "batch_size" not in grid else fields)
    assert response.status_code == 400
    assert message in " ".join(response.json()[field]), response.json()
    assert not Run.objects.exists()


def test_it_refuses_a_sweep_on_a_failed_dataset_as_a_whole(owner_client, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.FAILED)
    response = sweep(owner_client, dataset, {"lr": [0.1, 0.01]}, batch_size=8)
    assert response.status_code == 400 and "is failed; build it again" in response.json()["dataset"][0]
    assert not Run.objects.exists()
