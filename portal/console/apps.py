from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The operator's console (``manage.py tollgate``) and the demo's processes: an app only so that
    Django finds the command. It imports every app; no app imports it (tests/test_architecture.py)."""

    name = "portal.console"
    label = "console"
