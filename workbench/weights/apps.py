from django.apps import AppConfig


class WeightsConfig(AppConfig):
    name = "workbench.weights"
    label = "weights"
    verbose_name = "Weights store"
