from django.urls import path

from portal.projects import audit_views as views

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
]
