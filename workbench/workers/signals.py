"""What a worker's heartbeat asks of the apps above this one, without importing them.

Each app connects its receivers in its AppConfig.ready(): datasets requeues the builds of lost
workers, runs schedules and reclaims, inference fails jobs that stopped reporting. The heartbeat
sends them with send_robust, so one app's failure is logged and never stops another's work or
the beat itself.
"""

from django.dispatch import Signal

# Every beat of every worker, after its own host row is stored. Arguments: hostname.
heartbeat = Signal()

# A beat of a worker process that is on its way out (an unrecoverable consumer error, a
# shutdown): work it supervises should stop cleanly so it can be resumed. Arguments: hostname.
worker_stopping = Signal()
