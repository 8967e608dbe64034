from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "workbench.inference"
    label = "inference"
    verbose_name = "Inference"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals.
        from workbench.inference import receivers  # noqa: F401
