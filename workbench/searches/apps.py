from django.apps import AppConfig


class SearchesConfig(AppConfig):
    name = "workbench.searches"
    label = "searches"
    verbose_name = "Searches"

    def ready(self) -> None:
        # Connects this app's receivers: the runs app below sends the signals and never imports this one.
        from workbench.searches import receivers  # noqa: F401
