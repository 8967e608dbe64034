"""This worker process's boot id: a new one each time the process starts.

Work a worker takes (a run's attempt, a dataset build, an export) records the boot id it ran
under; when the host's heartbeat later carries another one, that work is known lost.
"""

import uuid

BOOT_ID = uuid.uuid4()
