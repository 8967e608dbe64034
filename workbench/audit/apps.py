from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "workbench.audit"
    label = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        # Sign-in and its failures, from every way in (django.contrib.auth's signals).
        from workbench.audit import receivers  # noqa: F401
