from django.urls import path

from portal.schedules import views

urlpatterns = [
    path("scenario/<uuid:code>/", views.schedules_edit, name="schedules-edit"),
]
