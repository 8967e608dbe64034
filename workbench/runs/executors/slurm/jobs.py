"""A run's attempt as a Slurm batch job: the script, the sbatch options, submission and stopping.

The job runs `python -m trainer train` once per node (`srun --ntasks-per-node=1`); each of
those starts its node's processes, and all of them meet on the job's first node (address from
`scontrol show node`, port derived from the job id: trainer/cluster.py). Output goes to the run
folder on shared storage: the events file the workbench follows (the same JSON lines as a local
run), each other node's outcome beside it, and Slurm's output as the run's trainer.log.

A job Slurm requeues (`scontrol requeue`, preemption, a failed node) runs the same script again
with SLURM_RESTART_COUNT raised: it writes the next attempt's events file and resumes from the
last checkpoint. The job name, `<prefix>-run<id>-a<first attempt>`, is how the follower finds
its jobs and knows which attempt a restarted job is on.
"""

from __future__ import annotations

import json
import logging
import shlex

from django.conf import settings
from django.db import transaction

from trainer import protocol
from workbench.runs.attempts.config import device_config, run_config
from workbench.runs.attempts.files import AttemptFiles
from workbench.runs.attempts.ingest import IngestLedger
from workbench.runs.lifecycle import run_finish, run_transition
from workbench.runs.models import Run
from workbench.runs.slurm_status import job_name
from workbench.slurm import commands

log = logging.getLogger(__name__)


def gpus_per_node(run: Run) -> int:
    request = run.devices_wanted
    return 0 if request.is_cpu else request.device_count


def slurm_trainer_config(run: Run) -> dict:
    """The trainer config of the job: each node's devices and the node count. Slurm's GRES
    placeholders of a test cluster have no CUDA behind them: with simulated GPUs (the same setting
    that makes a local worker announce fake GPUs, refused in production) each GPU is a gloo
    process on the CPU."""
    # Slurm sets CUDA_VISIBLE_DEVICES to the job's GPUs: the trainer names them from 0.
    devices = device_config(gpu_indexes=list(range(gpus_per_node(run))), simulated=settings.SIMULATED_GPUS)
    return {**run_config(run), "devices": devices.devices, "nodes": run.nodes}


def placement_preview(request, nodes: int) -> dict:
    """The new-run form's words for a run on Slurm: Slurm, not the workbench, decides when."""
    per_node = request.text
    where = f"{nodes} nodes x {per_node}" if nodes > 1 else per_node
    message = (
        f"Goes to Slurm partition {settings.SLURM_PARTITION} as a batch job on {where}; Slurm starts it when "
        "they are free, and the queue shows Slurm's reason while it waits."
    )
    return {"start_now": False, "position": None, "queue_length": None, "message": message}


def sbatch_options(run: Run, attempt: int) -> list[str]:
    gpus = gpus_per_node(run)
    options = [
        f"--job-name={job_name(run.pk, attempt)}",
        f"--partition={settings.SLURM_PARTITION}",
        f"--nodes={run.nodes}",
        "--ntasks-per-node=1",
        f"--chdir={run.run_dir}",
        f"--output={run.log_path}",
        "--open-mode=append",
        "--requeue",
    ]
    if gpus:
        options.append(f"--gres=gpu:{gpus}")
    if settings.SLURM_CPUS_PER_GPU:
        options.append(f"--cpus-per-task={max(1, gpus) * settings.SLURM_CPUS_PER_GPU}")
    if settings.SLURM_ACCOUNT:
        options.append(f"--account={settings.SLURM_ACCOUNT}")
    return options + shlex.split(settings.SLURM_SBATCH_OPTIONS)


def sampler_command(run: Run) -> str:
    """The system sampler each node starts its trainer through: no workbench worker runs there."""
    argv = [settings.SLURM_PYTHON, "-m", "trainer.system_samples", "--every", str(settings.SYSTEM_SAMPLE_SECONDS)]
    argv += ["--gpus", str(gpus_per_node(run))] + (["--simulated"] if settings.SIMULATED_GPUS else [])
    return " ".join(shlex.quote(arg) for arg in argv) + f' --out "{protocol.system_events_name("$attempt")}"'


def batch_script(run: Run, attempt: int, config_name: str) -> str:
    """The job's script. Its #SBATCH lines repeat the options it was submitted with, so the file
    alone says how to submit it again by hand."""
    python = shlex.quote(settings.SLURM_PYTHON)
    lines = ["#!/bin/bash", f"# Run {run.pk} of the workbench: {run.name}".replace("\n", " ")]
    lines += [f"#SBATCH {shlex.quote(option)}" for option in sbatch_options(run, attempt)]
    lines += [
        "set -u",
        f"export PYTHONPATH={shlex.quote(str(settings.BASE_DIR))}${{PYTHONPATH:+:$PYTHONPATH}}",
        # The first node hosts the rendezvous: its address as Slurm knows it, and a port per job.
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'MASTER_ADDR=$(scontrol show node "$first" -o | tr " " "\\n" | sed -n "s/^NodeAddr=//p")',
        "export MASTER_ADDR=${MASTER_ADDR:-$first}",
        "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))",
        # A requeued job runs this again: the next attempt, from the last checkpoint.
        f"attempt=$(({attempt} + ${{SLURM_RESTART_COUNT:-0}}))",
        'resume=""',
        '[ "$attempt" -gt 1 ] && resume="--resume"',
        'echo "--- attempt $attempt: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"',
        # Each node's trainer with its system sampler beside it (trainer/system_samples.py).
        f"exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 {sampler_command(run)} -- {python} -m trainer train "
        f'--config {shlex.quote(config_name)} --events "{protocol.events_name("$attempt")}" '
        "--placement-from-environment $resume",
    ]
    return "\n".join(lines) + "\n"


def submit(run: Run) -> str | None:
    """Submits the run's next attempt as a job; the job id, or None when another follower pass
    submitted it first or the run is no longer waiting to be submitted. Slurm refusing the job
    fails the run with Slurm's reason; a controller that does not answer leaves it queued."""
    attempt = run.attempt + 1
    claimed = Run.objects.filter(
        pk=run.pk, state__in=(Run.State.QUEUED, Run.State.INTERRUPTED), attempt=run.attempt, stop_request=""
    ).update(attempt=attempt, slurm_job_id="", slurm_state="")
    if not claimed:
        return None
    run.refresh_from_db()
    run.run_dir.mkdir(parents=True, exist_ok=True)
    files = AttemptFiles(run.run_dir, attempt)
    files.launch.write_text(json.dumps(slurm_trainer_config(run), indent=2))
    script = files.batch_script
    script.write_text(batch_script(run, attempt, files.launch.name))
    IngestLedger(run, attempt).start()
    try:
        job_id = commands.submit(script, options=sbatch_options(run, attempt))
    except commands.SlurmUnavailable:
        # Not submitted: the next pass tries again with the same attempt number.
        Run.objects.filter(pk=run.pk, attempt=attempt, slurm_job_id="").update(attempt=attempt - 1)
        raise
    except commands.SlurmError as error:
        run_finish(
            run=run,
            to_state=Run.State.FAILED,
            reason=f"Slurm refused the job: {error}",
            from_states=(Run.State.QUEUED, Run.State.INTERRUPTED),
        )
        return None
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(slurm_job_id=job_id, slurm_state="PENDING")
        run_transition(
            run=run,
            to_state=Run.State.WAITING,
            from_states=(Run.State.QUEUED, Run.State.INTERRUPTED),
            reason=f"submitted to Slurm as job {job_id} (attempt {attempt})",
            wait_reason="waiting for Slurm to start it",
            wait_holder=None,
            launched_attempt=attempt,
        )
    log.info("run %s attempt %s: Slurm job %s", run.pk, attempt, job_id)
    return job_id
