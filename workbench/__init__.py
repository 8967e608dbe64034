"""The workbench's Django project: settings, URLs, the Celery app (celery.py, loaded by apps.py)."""
