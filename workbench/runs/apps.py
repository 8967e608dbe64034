from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "workbench.runs"
    label = "runs"
    verbose_name = "Training runs"
