from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "portal.projects"
    label = "projects"
