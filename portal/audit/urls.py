from django.urls import path

from portal.audit import views

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
]
