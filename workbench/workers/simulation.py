"""A simulated inventory in the database: hosts with fake GPUs, for tests, benchmarks and demos.

Only rows are made (no worker behind them), so runs placed on them never start; use a worker
with WORKBENCH_SIMULATED_GPUS for simulated GPUs that really train (on the CPU).
"""

from __future__ import annotations

import uuid

from django.utils import timezone

from workbench.workers.inventory import host_heartbeat, simulated_gpus
from workbench.workers.models import WorkerHost


def simulate_hosts(*, hosts: int, gpus_per_host: int, prefix: str = "sim") -> list[WorkerHost]:
    cpu = {"kind": "cpu", "index": 0, "name": "Simulated CPU", "memory_total_mb": 0, "memory_used_mb": 0}
    return [
        host_heartbeat(
            hostname=f"{prefix}{number}@simulated",
            boot_id=uuid.uuid4(),
            devices=[*simulated_gpus(gpus_per_host), {**cpu, "simulated": True}],
        )
        for number in range(hosts)
    ]


def keep_alive(hosts: list[WorkerHost]) -> None:
    WorkerHost.objects.filter(pk__in=[host.pk for host in hosts]).update(last_seen=timezone.now())
