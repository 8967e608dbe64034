"""Reading Slurm's tools: GRES strings, node lists, reasons in words, a controller that is gone."""

from __future__ import annotations

import os
import stat

import pytest

from workbench.slurm import commands, words


def test_it_counts_gpus_in_gres_strings():
    assert commands.gpu_count("gpu:2") == 2
    assert commands.gpu_count("gpu:a100:4(S:0-1)") == 4
    assert commands.gpu_count("gpu:2,shard:8") == 2
    assert commands.gpu_count("(null)") == 0


def test_it_expands_compressed_node_lists():
    assert commands.expand_hostlist("n[1-3,7],gpu01") == ["n1", "n2", "n3", "n7", "gpu01"]
    assert commands.expand_hostlist("node[08-10]") == ["node08", "node09", "node10"]
    assert commands.expand_hostlist("") == []


def test_it_says_slurms_pending_reasons_in_plain_words():
    assert words.pending_words("Resources") == (
        "waiting for the GPUs or nodes it asked for to free up (Slurm: Resources)"
    )
    assert words.pending_words("QOSMaxGRESPerUser").startswith("a QOS limit: you are at your GPU limit")
    assert words.pending_words("SomethingNew") == "Slurm: SomethingNew"
    assert words.end_words("NODE_FAIL") == "a node of the job failed (NODE_FAIL)"


def fake_tool(tmp_path, name: str, script: str) -> None:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_it_tells_a_controller_that_does_not_answer_from_a_refusal(tmp_path, monkeypatch, settings):
    # The real tools against a dead controller are tested in tests/workbench/runs/test_slurm.py;
    # here their two ways of failing, as Slurm words them.
    fake_tool(
        tmp_path, "squeue", "echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2; exit 1"
    )
    fake_tool(
        tmp_path,
        "sbatch",
        "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2; exit 1",
    )
    fake_tool(tmp_path, "scontrol", "sleep 5")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    settings.SLURM_COMMAND_TIMEOUT_SECONDS = 1
    with pytest.raises(commands.SlurmUnavailable, match="does not answer"):
        commands.jobs(name_prefix="wb-run")
    with pytest.raises(commands.SlurmError) as refused:
        commands.submit(tmp_path / "job.sh", options=[])
    assert str(refused.value) == "Batch job submission failed: Invalid partition name specified"
    assert commands.controller_answers() is False  # a hanging tool is a controller that does not answer


def test_it_reads_jobs_from_squeue(tmp_path, monkeypatch):
    rows = [
        "12|wb-run7-a1|RUNNING|None|2026-12-01T10:57:01|n[1-2]|0|",
        "13|wb-run8-a2|PENDING|Resources|2027-12-01T10:57:01||1|",
        "14|someone-elses-job|RUNNING|None|2026-12-01T10:57:01|n1|0|",
    ]
    fake_tool(tmp_path, "squeue", "printf '%s\\n' " + " ".join(f"'{row}'" for row in rows))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    jobs = commands.jobs(name_prefix="wb-run")
    assert sorted(jobs) == ["12", "13"]
    assert jobs["12"].is_running and jobs["12"].nodes == "n[1-2]" and jobs["12"].reason == ""
    # A start a year away is Slurm's "when a job without a time limit ends": no estimate.
    assert jobs["13"].state == "PENDING" and jobs["13"].start is None and jobs["13"].restarts == 1


def test_it_reads_each_time_a_job_held_its_gpus_from_sacct_in_utc(tmp_path, monkeypatch):
    # The real sacct over slurmdbd is tested in tests/workbench/runs/test_slurm.py; here a job
    # Slurm requeued (two records), one still running, and one on a cluster that counts no GPUs.
    rows = [
        "21|REQUEUED|2026-12-01T10:00:00|2026-12-01T10:30:00|1800|billing=2,cpu=2,gres/gpu=2,node=1",
        "21|COMPLETED|2026-12-01T10:31:00|2026-12-01T11:31:00|3600|billing=4,cpu=4,gres/gpu=4,node=2",
        "22|RUNNING|2026-12-01T10:00:00|Unknown|60|cpu=1,gres/gpu=1,node=1",
        "23|CANCELLED by 0|2026-12-01T10:00:00|2026-12-01T10:00:10|10|cpu=1,node=1",
    ]
    # The rows as a machine in another zone prints them would be wrong: sacct is asked in UTC.
    fake_tool(tmp_path, "sacct", "[ \"$TZ\" = UTC ] || exit 3; printf '%s\\n' " + " ".join(f"'{r}'" for r in rows))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    found = commands.allocations(["21", "22", "23"])
    assert [(a.state, a.elapsed_seconds, a.gpus) for a in found["21"]] == [
        ("REQUEUED", 1800, 2),
        ("COMPLETED", 3600, 4),
    ]
    assert found["21"][1].start.isoformat() == "2026-12-01T10:31:00+00:00"
    assert found["22"][0].end is None and found["23"][0].gpus is None and found["23"][0].state == "CANCELLED"


def test_it_says_when_the_cluster_keeps_no_accounting(tmp_path, monkeypatch):
    fake_tool(tmp_path, "sacct", "echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert commands.allocations(["21"]) is None
    assert commands.allocations([]) == {}


def test_it_decides_nothing_while_the_accounting_does_not_answer(tmp_path, monkeypatch):
    fake_tool(tmp_path, "sacct", "echo 'sacct: error: Problem talking to the database: Connection refused' >&2; exit 1")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert commands.allocations(["21"]) == {}  # not None: the estimates wait for it
