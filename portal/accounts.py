"""The account adapter of django-allauth: sign-up is the operator's switch (TOLLGATE_SIGNUP), and
failed logins are counted per account, whatever login names it."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.utils import filter_users_by_email, filter_users_by_username
from django.conf import settings
from django.contrib.sites.shortcuts import get_current_site


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        return settings.TOLLGATE_SIGNUP

    def _get_login_attempts_cache_key(self, request, **credentials) -> str:
        """The key ``ACCOUNT_RATE_LIMITS["login_failed"]`` counts failures under (allauth's own
        is the text typed): the account the login names, so five failures as ``viewer`` also lock
        ``viewer@example.test`` and ``VIEWER``. A login that names no account keeps allauth's key
        (the text); the per-address limit counts every attempt either way."""
        pks: set[int] = set()
        if credentials.get("username"):
            pks.update(filter_users_by_username(credentials["username"]).values_list("pk", flat=True))
        if credentials.get("email"):
            pks.update(user.pk for user in filter_users_by_email(credentials["email"]))
        if not pks:
            return super()._get_login_attempts_cache_key(request, **credentials)
        # Several accounts only when one's username is another's e-mail address: counted together.
        return f"{get_current_site(request).domain}:user:{','.join(map(str, sorted(pks)))}"


def signup_context(request) -> dict:
    """Template context: whether the login page offers sign-up."""
    return {"signup_open": settings.TOLLGATE_SIGNUP}
