from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workbench.workers"
    label = "workers"
    verbose_name = "Worker hosts"
