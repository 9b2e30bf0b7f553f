from django.apps import AppConfig


class SharingConfig(AppConfig):
    name = "portal.sharing"
    label = "sharing"
