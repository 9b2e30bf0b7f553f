from importlib import import_module

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "portal.audit"
    label = "audit"
    verbose_name = "Audit log"

    def ready(self) -> None:
        import_module("portal.audit.receivers")  # connects the signal receivers (needs the app registry)
