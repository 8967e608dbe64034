"""GPU-hour quotas: the arithmetic (workbench/projects/quotas.py), the queue holding a job whose
owner's or project's quota is spent while it keeps its place (runs/scheduler/quotas.py), and the
doors that set and show them (API, command)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from tests.support.factories import make_dataset_row
from workbench.projects.models import Quota
from workbench.projects.quotas import Stretch, allowed_again_at, hold, used_hours
from workbench.runs.devices import DeviceRequest
from workbench.runs.executors.slurm.reconcile import submit_when_ready
from workbench.runs.lifecycle import run_finish
from workbench.runs.models import Run, RunTransition
from workbench.runs.scheduler import placement_preview, queue_for, schedule
from workbench.runs.scheduler.quotas import gpu_stretches
from workbench.runs.services import run_create
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)


def _at(hours_ago: float) -> datetime:
    return NOW - timedelta(hours=hours_ago)


def test_it_counts_the_part_of_each_stretch_inside_the_period(owner, project):
    month = Quota(user=owner, gpu_hours=10, period=Quota.Period.MONTH)
    stretches = [
        Stretch(owner.pk, None, _at(3), _at(1), 2),  # 2 h x 2 GPUs
        Stretch(owner.pk, project.pk, datetime(2026, 11, 30, 23, tzinfo=UTC), datetime(2026, 12, 1, 1, tzinfo=UTC), 1),
        Stretch(owner.pk + 99, None, _at(5), _at(1), 8),  # another user's
    ]
    assert used_hours(month, stretches, NOW) == pytest.approx(4 + 1)  # only December's hour of the second
    rolling = Quota(project=project, gpu_hours=1, period=Quota.Period.ROLLING, window_days=1)
    assert used_hours(rolling, stretches, NOW) == 0  # the project's use was 9 days ago
    assert allowed_again_at(month, stretches, NOW) == datetime(2027, 1, 1, tzinfo=UTC)


def test_it_says_when_a_rolling_window_has_room_again(owner):
    quota = Quota(user=owner, gpu_hours=3, period=Quota.Period.ROLLING, window_days=1)
    # 4 GPU-hours: 2 GPUs from 20 h ago to 18 h ago. One GPU-hour over: room once the first half
    # hour of it (2 GPUs) leaves the 24-hour window, 24.5 h after it began.
    stretches = [Stretch(owner.pk, None, _at(20), _at(18), 2)]
    assert used_hours(quota, stretches, NOW) == pytest.approx(4)
    assert allowed_again_at(quota, stretches, NOW) == _at(20) + timedelta(days=1, minutes=30)


def _ran(owner, dataset, *, gpus: int, hours: float, project=None) -> Run:
    """A run that held `gpus` GPUs for `hours` and has just ended, through the lifecycle (which
    writes the stretch into the quotas' ledger)."""
    run = Run.objects.create(owner=owner, name="done", dataset=dataset, network="lenet", project=project,
                             device_request=DeviceRequest.gpus(gpus).to_dict(), state=Run.State.RUNNING)  # fmt: skip
    RunTransition.objects.create(run=run, from_state="queued", to_state="running")
    RunTransition.objects.filter(run=run).update(at=timezone.now() - timedelta(hours=hours))
    run_finish(run=run, to_state=Run.State.DONE, reason="test")
    return run


def _submit(owner, dataset, request: DeviceRequest, name: str) -> Run:
    return run_create(owner=owner, dataset=dataset, name=name, network="lenet", config={}, device_request=request)


def test_it_holds_a_gpu_run_over_its_projects_quota_and_keeps_its_place(owner, viewer, other_user, project):
    simulate_hosts(hosts=1, gpus_per_host=2)
    shared = make_dataset_row(owner, project=project)
    _ran(owner, shared, gpus=2, hours=1.5, project=project)  # 3.0 GPU-hours of the project's
    Quota.objects.create(project=project, gpu_hours=2)
    held_run = _submit(viewer, shared, DeviceRequest.gpus(1), "vic's second")
    cpu_run = _submit(viewer, shared, DeviceRequest.cpu(), "vic's cpu")
    stranger = _submit(other_user, make_dataset_row(other_user), DeviceRequest.gpus(2), "bob's")
    schedule()
    for run in (held_run, cpu_run, stranger):
        run.refresh_from_db()
    assert held_run.project == project and held_run.state == Run.State.WAITING
    assert held_run.wait_reason == "over quota: 3.0 of 2 GPU-hours this month for project vision-lab"
    first_of_next_month = (timezone.now().replace(day=1) + timedelta(days=32)).replace(day=1)
    assert held_run.estimated_start.date() == first_of_next_month.date()
    assert cpu_run.state == Run.State.RUNNING  # the CPU counts no GPU-hours
    assert stranger.state == Run.State.RUNNING  # it blocked no one behind it
    # Other users read that it is over a quota, not whose nor how much; its owner reads it all.
    assert [row["wait_reason"] for row in queue_for(other_user)["waiting"]] == ["over quota"]
    assert [row["wait_reason"] for row in queue_for(viewer)["waiting"]] == [held_run.wait_reason]
    queued_at = held_run.queued_at
    Quota.objects.filter(project=project).update(gpu_hours=50)
    Run.objects.filter(pk=stranger.pk).update(state=Run.State.DONE)
    Device.objects.update(run=None)
    schedule()
    held_run.refresh_from_db()
    assert held_run.state == Run.State.RUNNING and held_run.queued_at == queued_at


def test_it_holds_by_the_owners_own_quota_too(owner):
    dataset = make_dataset_row(owner)
    _ran(owner, dataset, gpus=1, hours=0.5)
    Quota.objects.create(user=owner, gpu_hours=0.25, period=Quota.Period.ROLLING, window_days=7)
    found = hold(owner_id=owner.pk, project_id=None, stretches=_stretches(), now=timezone.now())
    assert found is not None and found[0] == "over quota: 0.5 of 0.25 GPU-hours in the last 7 days for user alice"


def _stretches():
    return gpu_stretches(now=timezone.now())


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_it_lets_staff_alone_set_and_clear_quotas_and_shows_the_use(staff_user, owner, viewer, project):
    _ran(owner, make_dataset_row(owner, project=project), gpus=2, hours=0.5, project=project)
    body = {"project": "vision-lab", "gpu_hours": 40, "period": "month"}
    refused = _as(owner).put("/api/quotas/", body, content_type="application/json")
    assert refused.status_code == 403 and "only staff" in refused.json()["detail"]
    answer = _as(staff_user).put("/api/quotas/", body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert (answer.json()["used_gpu_hours"], answer.json()["gpu_hours"]) == (pytest.approx(1.0, abs=0.01), 40)
    bad = _as(staff_user).put("/api/quotas/", {**body, "gpu_hours": -1}, content_type="application/json")
    assert bad.status_code == 400 and "from 0" in bad.json()["gpu_hours"][0]
    both = _as(staff_user).put("/api/quotas/", {**body, "user": "alice"}, content_type="application/json")
    assert both.status_code == 400
    assert [row["for"] for row in _as(viewer).get("/api/quotas/").json()["results"]] == ["project vision-lab"]
    assert _as(staff_user).delete("/api/quotas/?project=vision-lab").status_code == 204
    assert not Quota.objects.exists()


def test_it_sets_and_lists_quotas_from_the_shell(staff_user, owner, project):
    out = StringIO()
    call_command("quota", "--as", "carol", "set", "--user", "alice", "--gpu-hours", "10", stdout=out)
    assert out.getvalue() == "user alice: 0.0 of 10 GPU-hours this month\n"
    with pytest.raises(CommandError, match="only staff set quotas"):
        call_command("quota", "--as", "alice", "set", "--user", "alice", "--gpu-hours", "99", stdout=StringIO())
    with pytest.raises(CommandError, match="window_days: 400 days: give 1 to 366"):
        call_command("quota", "--as", "carol", "set", "--project", "vision-lab", "--gpu-hours", "1",
                     "--period", "rolling", "--window-days", "400", stdout=StringIO())  # fmt: skip
    listing = StringIO()
    call_command("quota", "--as", "alice", "list", stdout=listing)
    assert listing.getvalue() == "user alice: 0.0 of 10 GPU-hours this month\n"


def test_it_keeps_the_use_where_and_whose_it_was_when_the_run_is_deleted_or_moved(owner, project):
    dataset = make_dataset_row(owner, project=project)
    run = _ran(owner, dataset, gpus=2, hours=1.0, project=project)
    quota = Quota.objects.create(project=project, gpu_hours=10)
    used = used_hours(quota, gpu_stretches(now=timezone.now()), timezone.now())
    assert used == pytest.approx(2.0, abs=0.01)
    Run.objects.filter(pk=run.pk).update(project=None)  # taken out of the project afterwards
    run.delete()  # and deleted: the hours were spent all the same
    assert used_hours(quota, gpu_stretches(now=timezone.now()), timezone.now()) == pytest.approx(used)
    mine = _ran(owner, make_dataset_row(owner), gpus=4, hours=1.0)
    Run.objects.filter(pk=mine.pk).update(project=project)  # shared after it ran: not the project's use
    assert used_hours(quota, gpu_stretches(now=timezone.now()), timezone.now()) == pytest.approx(used)


def test_it_holds_a_slurm_run_over_quota_before_submitting_it(owner, project):
    dataset = make_dataset_row(owner, project=project)
    _ran(owner, dataset, gpus=2, hours=1.5, project=project)
    Quota.objects.create(project=project, gpu_hours=2)
    run = Run.objects.create(owner=owner, name="on slurm", dataset=dataset, network="lenet", project=project,
                             executor=Run.Executor.SLURM, device_request=DeviceRequest.gpus(1).to_dict())  # fmt: skip
    submit_when_ready(run)  # would call sbatch if the quota allowed it: there is no cluster here
    run.refresh_from_db()
    assert run.slurm_job_id == "" and run.wait_reason.startswith("over quota: 3.0 of 2 GPU-hours")


def test_it_says_in_the_preview_that_a_spent_quota_would_hold_the_run(owner):
    simulate_hosts(hosts=1, gpus_per_host=2)
    _ran(owner, make_dataset_row(owner), gpus=1, hours=2.0)
    assert placement_preview(user=owner, request=DeviceRequest.gpus(1))["start_now"] is True
    Quota.objects.create(user=owner, gpu_hours=1)
    preview = placement_preview(user=owner, request=DeviceRequest.gpus(1))
    assert preview["start_now"] is False
    assert preview["message"].endswith("over quota: 2.0 of 1 GPU-hours this month for user alice.")
    assert placement_preview(user=owner, request=DeviceRequest.cpu())["start_now"] is True
