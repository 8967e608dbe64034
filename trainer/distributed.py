"""Multi-process training: one process per device (per group of `model_parallel` devices),
launched and supervised by us.

The launcher spawns N ranks (gloo on CPU, NCCL on CUDA), relays rank 0's events to the caller's
reporter through a queue (so any Reporter works, including in-process ones), and owns the final
status: if any rank dies, the others are terminated (SIGTERM, then SIGKILL after a grace period)
and the run ends with the first failure's message, never a hang. SIGTERM/SIGINT to the launcher
is forwarded to the ranks, which stop together and save a checkpoint.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import logging
import multiprocessing as mp
import os
import queue
import signal
import socket
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainer.cluster import NodePlacement
from trainer.config import TrainConfig, config_from_dict
from trainer.engine import StopFlag, run_rank
from trainer.events import EventLogHandler, Events, error_summary, log_to_stderr
from trainer.protocol import EXIT_DONE, EXIT_FAILED, EXIT_OK, Outcome
from trainer.stopping import stop_signals_held

log = logging.getLogger("trainer")
KILL_GRACE_S = 10.0  # after a rank failed: how long the others get to exit on SIGTERM


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class QueueReporter:
    def __init__(self, q: Any) -> None:
        self.q = q

    def emit(self, event: dict[str, Any]) -> None:
        self.q.put(("event", event))


def _die_with_parent() -> None:
    """Ask Linux to send us SIGTERM when the launcher dies, so ranks never outlive it (they then
    stop like on any SIGTERM: agree on a step, save, exit)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _rank_main(rank: int, local: int, world: int, rendezvous: str, raw_cfg: dict, resume: bool, q: Any) -> None:
    """Rank `rank` of `world` (its node's process `local`), meeting the others at `rendezvous`."""
    _die_with_parent()
    cfg = config_from_dict(raw_cfg, check_paths=False)
    stop = StopFlag()
    stop.install()  # also takes a stop signal that came while this process started
    log_to_stderr()  # a spawned rank does not run the CLI's main(): its own server-side copy
    events = Events(QueueReporter(q) if rank == 0 else None)
    handler = EventLogHandler(events)
    if rank == 0:
        logging.getLogger("trainer").addHandler(handler)
        logging.getLogger("trainer").setLevel(logging.INFO)
    first = cfg.rank_devices(rank)[0]  # the process's own device: its first stage's
    on_cuda = first != "cpu"
    if on_cuda:
        torch.cuda.set_device(first)
    outcome: Outcome
    try:
        dist.init_process_group(
            "nccl" if on_cuda else "gloo",
            init_method=rendezvous,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=cfg.dist_timeout_s),
            # Binding the group to one GPU makes NCCL refuse collectives on the process's other
            # GPUs, and DDP over a split network reduces each stage's gradients on its own GPU.
            device_id=torch.device("cuda", first) if on_cuda and cfg.model_parallel == 1 else None,
        )
        outcome = run_rank(cfg, rank=rank, world=world, resume=resume, events=events, stop=stop)
    except Exception as exc:
        log.exception("rank %d failed", rank)
        outcome = Outcome.failed(EXIT_FAILED, f"rank {rank}: {error_summary(exc)}")
    q.put(("outcome", local, outcome.code, outcome.state, outcome.message, outcome.fields, time.time()))
    if dist.is_initialized() and outcome.code in EXIT_OK:
        dist.destroy_process_group()
    # Exit without interpreter teardown: a failed peer can leave gloo threads that block exit.
    q.close()
    q.join_thread()
    os._exit(outcome.code)


def launch(cfg: TrainConfig, *, events: Events, resume: bool, stop: StopFlag, placement: NodePlacement) -> Outcome:
    """Starts this node's ranks and supervises them until all have exited."""
    world = cfg.world_size
    offset = placement.rank_offset(cfg.local_processes)
    ctx = mp.get_context("spawn")  # fork after torch/CUDA initialisation is unsafe
    q = ctx.Queue()
    port = placement.master_port or free_port()
    rendezvous = f"tcp://{placement.master_addr}:{port}"
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(offset + local, local, world, rendezvous, cfg.to_dict(), resume, q),
            name=f"trainer-rank{offset + local}",
        )
        for local in range(cfg.local_processes)
    ]
    # A stop signal to the process group while a rank still imports torch would kill it: held
    # pending until the rank's StopFlag is installed (see trainer.stopping).
    with stop_signals_held():
        for p in procs:
            p.start()
    # Who is who, for operators and tests (the runs app signals the whole process group).
    name = "processes.json" if placement.node_rank == 0 else f"processes.node{placement.node_rank}.json"
    Path(cfg.run_dir, name).write_text(
        json.dumps({"launcher": os.getpid(), "ranks": [p.pid for p in procs], "node": placement.node_name}),
        encoding="utf-8",
    )
    outcomes, first_failure = _supervise(procs, q, events=events, stop=stop)
    for p in procs:
        p.join()
    devices = [cfg.rank_devices(local) for local in range(cfg.local_processes)]
    return _summarise(procs, outcomes, first_failure, devices, offset=offset, placement=placement)


def _supervise(procs: list, q: Any, *, events: Events, stop: StopFlag) -> tuple[dict[int, tuple], int | None]:
    """Relays rank 0's events until every rank has exited; forwards a stop; ends the others when
    one fails. Returns each reporting rank's outcome and the first rank that failed."""
    outcomes: dict[int, tuple] = {}
    failed_at: float | None = None
    forwarded = False
    first_failure: int | None = None

    def drain(timeout: float) -> None:
        try:
            item = q.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            if item[0] == "event":
                events.reporter.emit(item[1])
            else:
                outcomes[item[1]] = item[2:]
            try:
                item = q.get_nowait()
            except queue.Empty:
                return

    while any(p.is_alive() for p in procs) or not q.empty():
        drain(0.2)
        if stop.requested and not forwarded:
            forwarded = True
            for p in procs:
                if p.is_alive():
                    os.kill(p.pid, signal.SIGTERM)
        for r, p in enumerate(procs):
            code = p.exitcode
            if code is not None and code not in EXIT_OK and failed_at is None:
                failed_at, first_failure = time.monotonic(), r
                for other in procs:
                    if other.is_alive():
                        other.terminate()
        if failed_at is not None and time.monotonic() - failed_at > KILL_GRACE_S:
            for p in procs:
                if p.is_alive():
                    p.kill()
        if not any(p.is_alive() for p in procs):
            drain(0.05)
            break
    return outcomes, first_failure


def _summarise(
    procs: list,
    outcomes: dict[int, tuple],
    first_failure: int | None,
    devices: list[list],
    *,
    offset: int,
    placement: NodePlacement,
) -> Outcome:
    """`procs`, `outcomes` and `devices` are by local index; messages name global ranks, and
    the node when the run spans several."""
    where = f" on node {placement.node_name}" if placement.nodes > 1 else ""
    codes = [p.exitcode for p in procs]
    if first_failure is None and all(c == EXIT_DONE for c in codes):
        _, _, message, fields, _ = outcomes.get(0, (EXIT_DONE, "done", "finished", {}, 0.0))
        return Outcome.done(message, **fields)
    if first_failure is None and all(c in EXIT_OK for c in codes):
        _, _, message, fields, _ = outcomes.get(0, (None, "stopped", "stopped", {}, 0.0))
        return Outcome.stopped(message, **fields)
    # A rank that vanished without reporting (SIGKILL, OOM killer, segfault) is the root cause:
    # the others only fail afterwards with "connection closed by peer".
    vanished = [r for r, c in enumerate(codes) if c not in EXIT_OK and r not in outcomes]
    if vanished:
        r = vanished[0]
        code = codes[r]
        how = (
            f"was killed by {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"exited with code {code} without a report"
        )
        return Outcome.failed(
            EXIT_FAILED,
            f"rank {offset + r}{where} (pid {procs[r].pid}, device {', '.join(map(str, devices[r]))}) {how}; "
            "the other ranks were stopped",
        )
    # Otherwise the earliest reported failure: the rank that hit OOM/NaN/an error first; the
    # others fail after it, in collectives, with less useful messages.
    failures = sorted((o[4], r) for r, o in outcomes.items() if o[0] not in EXIT_OK)
    if failures:
        r = failures[0][1]
        code, _, message, fields, _ = outcomes[r]
        return Outcome.failed(
            code, message if message.startswith("rank") else f"rank {offset + r}: {message}", **fields
        )
    return Outcome.failed(EXIT_FAILED, f"ranks exited with codes {codes}")
