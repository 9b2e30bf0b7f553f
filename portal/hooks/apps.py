from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "portal.hooks"
    label = "hooks"
