from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals.
        from datasets import receivers  # noqa: F401
