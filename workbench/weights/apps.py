from django.apps import AppConfig


class WeightsConfig(AppConfig):
    name = "workbench.weights"
    label = "weights"
    verbose_name = "Weights store"

    def ready(self) -> None:
        # Registers this app's schemes of the reference grammar (weights:, upload:).
        from workbench.weights import uploads  # noqa: F401
