from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "portal.ops"
    label = "ops"
