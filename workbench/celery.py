"""The Celery app: configured from Django settings (CELERY_*), tasks found in installed apps.

Besides the settings, the app names the worker's consumer (workbench/broker.py), which keeps a
worker consuming across a broker restart.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

app = Celery("workbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    worker_consumer="workbench.broker:Consumer",
    # Retry forever: a worker that gives up on the broker after 100 attempts is a worker that
    # stops consuming while it stays alive for its running tasks.
    broker_connection_retry=True,
    broker_connection_max_retries=None,
    # A lost broker connection must not cancel training tasks: they keep running, and their runs
    # stay abortable, while the consumer reconnects.
    worker_cancel_long_running_tasks_on_connection_loss=False,
)
app.autodiscover_tasks()
