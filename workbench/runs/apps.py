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
