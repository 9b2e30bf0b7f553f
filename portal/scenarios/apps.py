from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    name = "portal.scenarios"
    label = "scenarios"
