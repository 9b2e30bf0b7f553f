from django.urls import path

from portal.api import token_views

urlpatterns = [
    path("", token_views.tokens_list, name="tokens-list"),
    path("<uuid:code>/revoke/", token_views.tokens_revoke, name="tokens-revoke"),
]
