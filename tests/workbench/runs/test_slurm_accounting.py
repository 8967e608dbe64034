"""The GPU-hours of Slurm runs from sacct (workbench/runs/executors/slurm/accounting.py): the
follower's estimate in the quotas' ledger replaced by the cluster's records of the job. The real
sacct over slurmdbd is in test_slurm.py; here sacct is a stand-in printing what it prints, so
that requeued, running, forgotten and reused job ids can be set up."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from tests.workbench.slurm.test_commands import fake_tool
from workbench.core.ownership import ADMIN
from workbench.projects.models import GpuUsage, Membership, Project, Quota
from workbench.projects.quotas import Allocation, ledger_stretches, record_use, settle_from_sacct, used_hours
from workbench.runs.executors.slurm import accounting

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(owner):
    lab = Project.objects.create(name="Vision lab", slug="vision-lab")
    Membership.objects.create(project=lab, user=owner, role=ADMIN)
    return lab


def _estimate(owner, project, *, job: str, start: datetime, end: datetime, gpus: int = 2) -> None:
    record_use(owner_id=owner.pk, project_id=project.pk if project else None, job_kind="run", job_id=7,
               start=start, end=end, gpus=gpus, slurm_job_id=job)  # fmt: skip


def _sacct(tmp_path, monkeypatch, rows: list[str]) -> None:
    fake_tool(tmp_path, "sacct", "printf '%s\\n' " + " ".join(f"'{row}'" for row in rows))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(accounting, "_last_pass", 0.0)


def test_it_replaces_the_estimate_with_each_time_the_job_ran_charged_to_the_same_owner_and_project(owner, project):
    start = datetime(2026, 12, 1, 10, 0, 5, tzinfo=UTC)
    _estimate(owner, project, job="21", start=start, end=start + timedelta(minutes=90))
    record_use(owner_id=owner.pk, project_id=None, job_kind="benchmark", job_id=3, start=start,
               end=start + timedelta(hours=1), gpus=1)  # fmt: skip
    requeued = [
        Allocation(
            start=datetime(2026, 12, 1, 10, 0, tzinfo=UTC), end=datetime(2026, 12, 1, 10, 30, tzinfo=UTC), gpus=2
        ),
        Allocation(
            start=datetime(2026, 12, 1, 10, 31, tzinfo=UTC), end=datetime(2026, 12, 1, 11, 31, tzinfo=UTC), gpus=4
        ),
    ]
    settle_from_sacct(slurm_job_id="21", allocations=requeued)
    rows = GpuUsage.objects.filter(slurm_job_id="21")
    assert sorted(rows.values_list("accounted_by", "gpus")) == [("sacct", 2), ("sacct", 4)]
    assert {(row.user_id, row.project_id_then, row.job_kind, row.job_id) for row in rows} == {
        (owner.pk, project.pk, "run", 7)
    }
    quota = Quota.objects.create(project=project, gpu_hours=100)
    now = datetime(2026, 12, 2, tzinfo=UTC)
    assert used_hours(quota, ledger_stretches(since=now - timedelta(days=30)), now) == pytest.approx(0.5 * 2 + 1.0 * 4)
    assert GpuUsage.objects.get(job_kind="benchmark").accounted_by == "workbench"  # not Slurm's: left alone
    settle_from_sacct(slurm_job_id="21", allocations=requeued[:1])  # again (another follower): nothing changes
    assert rows.count() == 2


def test_it_keeps_the_estimate_where_the_cluster_counts_no_gpus_or_keeps_no_accounting(owner, project):
    start = timezone.now() - timedelta(hours=2)
    _estimate(owner, project, job="30", start=start, end=start + timedelta(hours=1), gpus=4)
    _estimate(owner, None, job="31", start=start, end=start + timedelta(hours=1), gpus=2)
    # AllocTRES without gres/gpu: sacct's times, the GPUs the run asked for.
    settle_from_sacct(
        slurm_job_id="30", allocations=[Allocation(start=start, end=start + timedelta(minutes=59), gpus=None)]
    )
    assert GpuUsage.objects.filter(slurm_job_id="30").values_list("accounted_by", "gpus").get() == ("sacct", 4)
    settle_from_sacct(slurm_job_id="31", allocations=None)
    kept = GpuUsage.objects.get(slurm_job_id="31")
    assert (kept.accounted_by, kept.end - kept.start) == ("workbench", timedelta(hours=1))


def test_it_settles_ended_jobs_only_and_not_from_an_older_job_of_the_same_id(owner, project, tmp_path, monkeypatch):
    now = timezone.now().replace(microsecond=0)
    _estimate(owner, project, job="21", start=now - timedelta(minutes=60), end=now - timedelta(minutes=1))
    _estimate(owner, project, job="22", start=now - timedelta(minutes=30), end=now - timedelta(minutes=20))
    _estimate(owner, project, job="23", start=now - timedelta(days=3), end=now - timedelta(days=2))
    iso = lambda moment: moment.astimezone(UTC).replace(tzinfo=None).isoformat()  # noqa: E731 - sacct's form
    _sacct(tmp_path, monkeypatch, [
        # A job 21 of the cluster's earlier life (its ids started again since): not this run's.
        f"21|COMPLETED|{iso(now - timedelta(days=200))}|{iso(now - timedelta(days=199))}|86400|gres/gpu=8,node=1",
        f"21|COMPLETED|{iso(now - timedelta(minutes=61))}|{iso(now - timedelta(minutes=2))}|3540|gres/gpu=2,node=1",
        # 22 was requeued and runs again: its use is not known until it ends.
        f"22|REQUEUED|{iso(now - timedelta(minutes=31))}|{iso(now - timedelta(minutes=21))}|600|gres/gpu=2,node=1",
        f"22|RUNNING|{iso(now - timedelta(minutes=5))}|Unknown|300|gres/gpu=2,node=1",
        # 23 never reached the accounting (slurmdbd lost it): after a day the estimate stands.
    ])  # fmt: skip
    assert accounting.settle_pass() == 2
    settled = GpuUsage.objects.get(slurm_job_id="21")
    assert (settled.accounted_by, (settled.end - settled.start).total_seconds(), settled.gpus) == ("sacct", 3540, 2)
    assert GpuUsage.objects.get(slurm_job_id="22").accounted_by == "estimate"
    assert GpuUsage.objects.get(slurm_job_id="23").accounted_by == "workbench"
    assert accounting.settle_pass() == 0  # within SETTLE_SECONDS of the last: sacct is not asked again
