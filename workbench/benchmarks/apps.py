from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "workbench.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals.
        from workbench.benchmarks import receivers  # noqa: F401
