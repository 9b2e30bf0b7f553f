from django.apps import AppConfig


class SigningConfig(AppConfig):
    name = "portal.signing"
    label = "signing"
