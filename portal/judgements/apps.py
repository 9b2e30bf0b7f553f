from django.apps import AppConfig


class JudgementsConfig(AppConfig):
    name = "portal.judgements"
    label = "judgements"
