"""The one queue and the allocation of devices, for every kind of job: runs (a search's trials
are runs) and benchmarks.

- `jobs`: what the queue places (Job) and what it asks of each kind (JobKind), and their registry;
- `placement`: queue order, the inventory of devices, placement, the pass's loop (plan);
- `estimates`: when each waiting job should start;
- `run_jobs`: the runs' kind (allocation, launch, relaunch of lost messages, wait reasons);
- `passes`: one pass (schedule), the new-run form's dry run, the queue page's reads.

The benchmarks' kind registers itself from its app (workbench/benchmarks/scheduling.py), so this
package never imports an app above the runs.
"""

from workbench.runs.scheduler.jobs import Job, register
from workbench.runs.scheduler.passes import placement_preview, queue_for, queue_rows, running_rows, schedule
from workbench.runs.scheduler.placement import Inventory, find_placement, queue_order
from workbench.runs.scheduler.run_jobs import RUNS, relaunch_unclaimed

register(RUNS)

__all__ = [
    "Inventory",
    "Job",
    "find_placement",
    "placement_preview",
    "queue_for",
    "queue_order",
    "queue_rows",
    "register",
    "relaunch_unclaimed",
    "running_rows",
    "schedule",
]
