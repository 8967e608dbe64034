from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "workbench.runs"
    label = "runs"
    verbose_name = "Training runs"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals and of freed devices.
        from workbench.runs import receivers  # noqa: F401
