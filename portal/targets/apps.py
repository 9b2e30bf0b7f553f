from django.apps import AppConfig


class TargetsConfig(AppConfig):
    name = "portal.targets"
    label = "targets"
