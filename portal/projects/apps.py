from importlib import import_module

from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "portal.projects"
    label = "projects"

    def ready(self) -> None:
        import_module("portal.projects.switcher")  # connects its signal receivers (needs the app registry)
