from django.urls import path

from portal.scenarios import views as scenarios
from portal.targets import clientcert_views, deletion, views

urlpatterns = [
    path("", views.targets_list, name="targets-list"),
    path("<uuid:code>/edit/", views.target_edit, name="targets-edit"),
    path("<uuid:code>/ssh/", views.ssh_settings, name="target-ssh"),
    path("<uuid:code>/client-certs/", clientcert_views.client_certs, name="target-client-certs"),
    path(
        "<uuid:code>/client-certs/<str:key_type>/forget/",
        clientcert_views.client_cert_forget,
        name="target-client-cert-forget",
    ),
    path("<uuid:code>/verification/", views.target_verification, name="target-verification"),
    path("<uuid:code>/delete/", deletion.targets_delete, name="targets-delete"),
    path("<uuid:code>/ssh/delete/", deletion.ssh_delete, name="target-ssh-delete"),
    path("scenarios/<uuid:code>/delete/", scenarios.scenarios_delete, name="scenarios-delete"),
    path("<uuid:code>/ssh/forget-host-key/", views.ssh_forget_host_key, name="target-ssh-forget"),
]
