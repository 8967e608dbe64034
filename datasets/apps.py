from django.apps import AppConfig

from datasets.image_limits import configured_image_limits
from datasets.images import set_image_limits


class DatasetsConfig(AppConfig):
    name = "datasets"
    verbose_name = "Datasets"

    def ready(self) -> None:
        # Connects this app's receivers of the workers' heartbeat signals; in ready(), not at the
        # top, because the receivers' module imports models, which need the app registry loaded.
        from datasets import receivers  # noqa: F401

        # Every image this process decodes (inference requests, previews, builds run inline) is
        # judged by the configured limits; workers and job children are handed the same ones.
        set_image_limits(configured_image_limits())
