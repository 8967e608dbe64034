from django.apps import AppConfig


class LabelChecksConfig(AppConfig):
    name = "workbench.labelchecks"
    label = "labelchecks"
    verbose_name = "Label checks"
