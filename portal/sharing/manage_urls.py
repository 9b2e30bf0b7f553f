"""The owner's pages of share links under ``/shares/`` (login required)."""

from django.urls import path

from portal.sharing import manage

urlpatterns = [
    path("", manage.share_list, name="sharing-list"),
    path("new/", manage.share_create, name="sharing-create"),
    path("<uuid:code>/revoke/", manage.share_revoke, name="sharing-revoke"),
]
