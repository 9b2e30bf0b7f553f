from importlib import import_module

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "portal.api"
    label = "api"

    def ready(self) -> None:
        import_module("portal.api.receivers")  # revokes a removed member's tokens (needs the app registry)
