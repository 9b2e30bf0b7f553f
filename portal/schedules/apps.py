from importlib import import_module

from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "portal.schedules"
    label = "schedules"

    def ready(self) -> None:
        import_module("portal.schedules.receivers")  # a deleted schedule drops its beat task
