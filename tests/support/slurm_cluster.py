"""A real two-node Slurm cluster on this machine, for the tests of the Slurm executor.

One `munged` with its own key and socket, one `slurmctld` and two `slurmd -N n1|n2` on
127.0.0.1 with distinct ports, and the accounting a lab's cluster keeps (sacct): a `slurmdbd`
over its own MariaDB server; every config, state, spool, database and log file in one folder. Each node
declares GPUs as GRES over placeholder files: there is no CUDA behind them, so the workbench
runs with simulated GPUs (the trainer uses gloo on the CPU) exactly as its setting says.

`python -m tests.support.slurm_cluster [folder]` starts one by hand and prints the environment
to use it (SLURM_CONF); Ctrl-C stops it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.support.waiting import wait_until

NODES = ("n1", "n2")
GPUS_PER_NODE = 2
PARTITION = "wb"
# The same nodes at a higher priority tier: a job here preempts (cancels) the workbench's jobs,
# as a lab's urgent partition does, and they end PREEMPTED.
URGENT_PARTITION = "wb-urgent"
# Slurm's time between SIGTERM and SIGKILL when a job is cancelled or requeued: long enough for
# a loaded 2-core machine's trainer to reach its next stop agreement and write a checkpoint.
KILL_WAIT_SECONDS = 60


_TOOLS = ("munged", "slurmctld", "slurmd", "slurmdbd", "sbatch", "squeue", "scontrol", "sacct", "sacctmgr")


def _tool(name: str) -> str | None:
    # Debian puts the daemons in /usr/sbin, which a non-root PATH may lack.
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")


def slurm_available() -> bool:
    return all(_tool(tool) for tool in (*_TOOLS, "mariadbd", "mariadb-install-db"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class SlurmCluster:
    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def command(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, env={**os.environ, **self.env}, capture_output=True, text=True, check=check, timeout=timeout
        )

    # ---------------------------------------------------------------- configuration

    def write_config(self) -> None:
        for sub in ("state", "log", "gpu", *(f"spool/{node}" for node in NODES)):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        for name in ("ctld", "dbd", "mariadb", *NODES):
            self.ports.setdefault(name, _free_port())
        for node in NODES:
            # Named like NVIDIA's device files (Slurm reads the GPU's index from the name), and
            # character devices as Slurm requires: copies of /dev/null, nothing behind them.
            (self.folder / "gpu" / node).mkdir(exist_ok=True)
            for index in range(GPUS_PER_NODE):
                placeholder = self.folder / "gpu" / node / f"nvidia{index}"
                if not placeholder.exists():
                    os.mknod(placeholder, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        folder = self.folder
        lines = [
            "ClusterName=workbench-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ports['ctld']}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={folder / 'munge.socket'}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={folder / 'state'}",
            f"SlurmdSpoolDir={folder / 'spool' / '%n'}",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={folder / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={folder / 'log' / 'slurmd-%n.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=2,bf_interval=2",
            "GresTypes=gpu",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.ports['dbd']}",
            # The munge socket for slurmdbd's connections (AuthInfo's is not used for them).
            f"AccountingStoragePass={folder / 'munge.socket'}",
            # sacct's AllocTRES names the GPUs a job held only where they are accounted.
            "AccountingStorageTRES=gres/gpu",
            "JobCompType=jobcomp/none",
            "SwitchType=switch/none",
            "LaunchType=launch/slurm",
            f"KillWait={KILL_WAIT_SECONDS}",
            "MinJobAge=600",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "InactiveLimit=0",
            "JobRequeue=1",
            "PreemptType=preempt/partition_prio",
            "PreemptMode=CANCEL",
        ]
        for node in NODES:
            lines.append(
                f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname=localhost Port={self.ports[node]} "
                f"CPUs=4 Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
            )
        nodes = ",".join(NODES)
        lines.append(f"PartitionName={PARTITION} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP PriorityTier=1")
        lines.append(
            f"PartitionName={URGENT_PARTITION} Nodes={nodes} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF"
        )
        self.conf.write_text("\n".join(lines) + "\n")
        gres = [
            f"NodeName={node} Name=gpu File={self.folder / 'gpu' / node}/nvidia[0-{GPUS_PER_NODE - 1}]"
            for node in NODES
        ]
        (self.folder / "gres.conf").write_text("AutoDetect=off\n" + "\n".join(gres) + "\n")
        dbd = [
            f"AuthType=auth/munge\nAuthInfo=socket={folder / 'munge.socket'}",
            f"DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={self.ports['dbd']}\nSlurmUser=root",
            f"PidFile={folder / 'slurmdbd.pid'}\nLogFile={folder / 'log' / 'slurmdbd.log'}",
            "StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStorageUser=root",
            f"StoragePort={self.ports['mariadb']}\nStorageLoc=slurm_acct_db",
        ]
        dbd_conf = self.folder / "slurmdbd.conf"
        dbd_conf.write_text("\n".join(dbd) + "\n")
        dbd_conf.chmod(0o600)  # slurmdbd refuses a config others may read

    # ---------------------------------------------------------------- daemons

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.folder / "log" / f"{name}.out").open("ab")
        self.processes[name] = subprocess.Popen(
            argv, env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start_munge(self) -> None:
        key = self.folder / "munge.key"
        if not key.exists():
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True)
            key.chmod(0o600)
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--socket={self.folder / 'munge.socket'}",
                f"--key-file={key}",
                f"--pid-file={self.folder / 'munged.pid'}",
                f"--log-file={self.folder / 'log' / 'munged.log'}",
                f"--seed-file={self.folder / 'munged.seed'}",
            ],
        )
        self._wait(lambda: (self.folder / "munge.socket").exists(), "munged did not create its socket")

    def start_accounting(self) -> None:
        """A MariaDB server of its own (no grant tables: only this folder's slurmdbd talks to it)
        and slurmdbd over it; the cluster registered, as `sacctmgr add cluster` does."""
        data = self.folder / "mariadb"
        if not data.exists():
            made = subprocess.run(
                [_tool("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert made.returncode == 0, f"mariadb-install-db: {made.stdout[-2000:]}{made.stderr[-2000:]}"
        self._spawn(
            "mariadbd",
            [_tool("mariadbd"), "--no-defaults", f"--datadir={data}", "--user=root", "--skip-grant-tables",
             "--bind-address=127.0.0.1", f"--port={self.ports['mariadb']}", f"--socket={data / 'mysqld.sock'}",
             f"--pid-file={data / 'mysqld.pid'}", "--innodb-buffer-pool-size=32M", "--skip-log-bin",
             f"--log-error={self.folder / 'log' / 'mariadb.log'}"],
        )  # fmt: skip
        self._wait(lambda: _port_open(self.ports["mariadb"]), "MariaDB does not answer")
        self._spawn("slurmdbd", [_tool("slurmdbd"), "-D", "-s"])
        self._wait(lambda: _port_open(self.ports["dbd"]), "slurmdbd does not answer", timeout=120)
        self.command("sacctmgr", "-i", "add", "cluster", "workbench-test", check=False)  # or it was already
        registered = self.command("sacctmgr", "-nP", "list", "cluster", "format=cluster").stdout
        assert "workbench-test" in registered, registered

    def start_controller(self) -> None:
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._wait(lambda: self.command("scontrol", "ping", check=False).stdout.count("UP") > 0, "slurmctld is not up")

    def stop_controller(self) -> None:
        self._stop("slurmctld")

    def start_nodes(self) -> None:
        for node in NODES:
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        self._wait(self.nodes_idle, "the nodes did not become idle")

    def lose_node(self, node: str) -> None:
        """The node dies as a host does: its slurmd and every job process on it at once (nothing
        is signalled, nothing saved), and the controller told at once instead of after SlurmdTimeout."""
        slurmd = self.processes.pop(f"slurmd-{node}")
        slurmd.kill()  # first: no step's end can reach the controller any more
        slurmd.wait()
        self.command("scontrol", "update", f"nodename={node}", "state=down", "reason=lost")
        doomed: dict[int, psutil.Process] = {}
        for process in psutil.process_iter():
            try:
                env = process.environ()
                if env.get("SLURM_CONF") != str(self.conf) or env.get("SLURMD_NODENAME") != node:
                    continue
                doomed[process.pid] = process
                parent = process.parent()  # the step's slurmstepd, which has no SLURM_ variables of its own
                if parent is not None and " ".join(parent.cmdline()).startswith("slurmstepd"):
                    doomed[parent.pid] = parent
            except psutil.Error:
                continue
        for process in doomed.values():
            with contextlib.suppress(psutil.Error):
                process.kill()

    def restore_node(self, node: str) -> None:
        """A lost node back: its slurmd again, and the controller told it may use it."""
        self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        self.command("scontrol", "update", f"nodename={node}", "state=resume", check=False)
        self._wait(self.nodes_idle, f"{node} did not come back")

    def nodes_idle(self) -> bool:
        out = self.command("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split("\n")
        states = dict(line.split() for line in out if line.strip())
        return all(states.get(node, "").startswith(("idle", "mix", "alloc")) for node in NODES)

    def start(self) -> SlurmCluster:
        try:
            self.write_config()
            self.start_munge()
            self.start_accounting()
            self.start_controller()
            self.start_nodes()
        except BaseException:  # pytest.fail's is no Exception: no daemon outlives a start that failed
            self.stop()
            raise
        return self

    def cancel_all(self) -> None:
        """Ends every job (a test's leftovers) and waits until the nodes are free again."""
        self.command("scancel", "--full", "--signal=KILL", "--user=root", check=False)
        self.command("scancel", "--user=root", check=False)
        self._wait(lambda: not self.command("squeue", "-h", "-t", "PD,R,CG,S", check=False).stdout.strip(), "jobs left")

    def stop(self) -> None:
        self.command("scancel", "--user=root", check=False, timeout=10) if "slurmctld" in self.processes else None
        for name in [*(f"slurmd-{node}" for node in NODES), "slurmctld", "slurmdbd", "mariadbd", "munged"]:
            self._stop(name)

    def _stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _wait(self, ready, what: str, timeout: float = 60.0) -> None:
        def answered() -> bool:
            try:
                return bool(ready())
            except (subprocess.SubprocessError, ValueError):  # a daemon still starting: ask again
                return False

        def logs() -> str:
            tails = (f"--- {path.name}\n{path.read_text()[-2000:]}" for path in (self.folder / "log").glob("*"))
            return f"the Slurm test cluster: {what}\n" + "\n".join(tails)

        wait_until(answered, what=logs, timeout=timeout, interval=0.3)


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="slurm-"))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # for sigwait
    cluster = SlurmCluster(folder).start()
    print(f"export SLURM_CONF={cluster.conf}", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
