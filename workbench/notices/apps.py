from django.apps import AppConfig


class NoticesConfig(AppConfig):
    name = "workbench.notices"
    label = "notices"
    verbose_name = "Notices"

    def ready(self) -> None:
        # Hears the runs' ends and the workers' housekeeping (the apps below never import this one).
        from workbench.notices import receivers  # noqa: F401
