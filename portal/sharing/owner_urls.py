"""The owner's pages of share links under ``/shares/`` (login required)."""

from django.urls import path

from portal.sharing import owner_views

urlpatterns = [
    path("", owner_views.share_list, name="sharing-list"),
    path("new/", owner_views.share_create, name="sharing-create"),
    path("<uuid:code>/revoke/", owner_views.share_revoke, name="sharing-revoke"),
]
