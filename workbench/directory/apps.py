from django.apps import AppConfig


class DirectoryConfig(AppConfig):
    name = "workbench.directory"
    label = "directory"
    verbose_name = "Sign-in through the lab's directory"

    def ready(self) -> None:
        # A mapping that does not parse fails `manage.py check` and the start, naming the entry.
        from workbench.directory import checks  # noqa: F401
