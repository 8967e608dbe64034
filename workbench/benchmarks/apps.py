from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "workbench.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        # Connects this app's receivers, and puts benchmarks in the one queue of the runs'
        # scheduler: the runs app lies below this one and never imports it.
        from workbench.benchmarks import receivers  # noqa: F401
        from workbench.benchmarks.scheduling import BENCHMARKS  # lazily: apps load before any model
        from workbench.runs.scheduler import register  # lazily: apps load before any model

        register(BENCHMARKS)
