from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "portal.schedules"
    label = "schedules"
