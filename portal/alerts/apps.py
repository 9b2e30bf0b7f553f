from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "portal.alerts"
    label = "alerts"
