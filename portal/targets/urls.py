from django.urls import path

from portal.targets import views

urlpatterns = [
    path("", views.targets_list, name="targets-list"),
    path("<uuid:code>/ssh/", views.ssh_settings, name="target-ssh"),
    path("<uuid:code>/verification/", views.target_verification, name="target-verification"),
    path("<uuid:code>/ssh/forget-host-key/", views.ssh_forget_host_key, name="target-ssh-forget"),
]
