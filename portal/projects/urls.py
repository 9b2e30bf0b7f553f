from django.urls import path

from portal.projects import views

urlpatterns = [
    path("", views.projects_list, name="projects-list"),
    path("switch/", views.projects_switch, name="projects-switch"),
    path("<uuid:code>/members/", views.projects_members, name="projects-members"),
    path(
        "invitations/<uuid:code>/<str:answer>/",
        views.projects_invitation,
        name="projects-invitation",
    ),
]
