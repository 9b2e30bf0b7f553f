from django.urls import path

from portal.scenarios import views

urlpatterns = [
    path("", views.scenarios_list, name="scenarios-list"),
    path("<uuid:code>/", views.scenarios_detail, name="scenarios-detail"),
    path("<uuid:code>/edit/", views.scenarios_edit, name="scenarios-edit"),
]
