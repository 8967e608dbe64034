"""What a worker asks of the apps above this one, without importing them.

Each app connects its receivers in its AppConfig.ready(): datasets requeues the builds of lost
workers, runs reclaims and schedules, inference fails jobs that stopped reporting, searches
advance. The worker sends them with send_robust, so one app's failure is logged and never stops
another's work.
"""

from django.dispatch import Signal

# Every housekeeping pass of every worker (heartbeat.py: its own thread, never the heartbeat's,
# one pass at a time among the workers). Arguments: hostname.
housekeeping = Signal()

# A beat of a worker process that is on its way out (an unrecoverable consumer error, a
# shutdown): work it supervises should stop cleanly so it can be resumed. Arguments: hostname.
worker_stopping = Signal()
