from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "workbench.inference"
    label = "inference"
    verbose_name = "Inference"
