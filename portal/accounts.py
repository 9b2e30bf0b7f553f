"""The account adapter of django-allauth: sign-up is the operator's switch (TOLLGATE_SIGNUP), and
failed logins are counted per account, whatever login names it. The model backend that loads the
signed-in user of every request by a compiled query."""

from __future__ import annotations

import functools

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.utils import filter_users_by_email, filter_users_by_username
from django.conf import settings
from django.contrib.auth import backends, get_user_model
from django.contrib.sites.shortcuts import get_current_site

from portal.compiled import Compiled


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


@functools.cache
def _user_by_pk() -> Compiled:
    model = get_user_model()
    return Compiled(lambda pk: model._default_manager.filter(pk=pk), pk=model._meta.pk)


class ModelBackend(backends.ModelBackend):
    """Django's, but the signed-in user that every request loads (``get_user``) is read by a query
    compiled once per thread (``portal.compiled``): Django's ``get(pk=…)`` built and compiled its SQL
    anew each time, about 1 ms of CPU, four times the cost of running it. The same row, the same
    checks (an inactive user is refused, Django then checks the session's password hash)."""

    def get_user(self, user_id):
        found = _user_by_pk().objects(pk=user_id)
        return found[0] if found and self.user_can_authenticate(found[0]) else None
