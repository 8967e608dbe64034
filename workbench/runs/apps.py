from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "workbench.runs"
    label = "runs"
    verbose_name = "Training runs"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals and of freed devices.
        from workbench.runs import receivers  # noqa: F401

        # The `run:` scheme of the weights reference grammar: the weights app, below, knows no runs.
        from workbench.runs.pretrained import RunScheme  # registered here, once the apps are loaded
        from workbench.weights.references import register  # with the scheme it registers

        register(RunScheme())

        # The quotas' use, counted by the queue's kinds; a changed quota asks for a pass.
        from workbench.projects.quotas import register_source  # the projects app, below, knows no runs
        from workbench.runs.scheduler.quotas import gpu_stretches  # registered here, once the apps are loaded
        from workbench.runs.services import queue_scheduling  # with the pass it asks for

        register_source(gpu_stretches, on_change=queue_scheduling)
