from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals; in ready(), not at the
        # top, because the receivers' module imports models, which need the app registry loaded.
        from datasets import receivers  # noqa: F401
