from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    name = "workbench"

    def ready(self) -> None:
        # The Celery app, loaded in every Django process (web, commands, the worker) so the apps'
        # shared tasks send through it. Not in workbench/__init__.py: the children that import a
        # workbench module without Django (the label reader, the inference engine) paid 0.45 s
        # and Django's import for it.
        import workbench.celery  # noqa: F401
