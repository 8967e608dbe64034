from django.apps import AppConfig


class LabelChecksConfig(AppConfig):
    name = "workbench.labelchecks"
    label = "labelchecks"
    verbose_name = "Label checks"

    def ready(self) -> None:
        # Connects this app's receivers: the runs app below sends the signals and never imports this one.
        from workbench.labelchecks import receivers  # noqa: F401
