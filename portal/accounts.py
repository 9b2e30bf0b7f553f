"""The account adapter of django-allauth: sign-up is the operator's switch (TOLLGATE_SIGNUP), and
failed logins are counted per account, whatever login names it. The model backend that loads the
signed-in user of every request by a compiled query.

The lock-out reaches into allauth's internals (``pre_authenticate``, ``_login_failed_rl_usage``,
``_delete_login_attempts_cached_email`` and ``allauth.core.internal.ratelimit``): they were read for
the allauth release ``PRIVATE_API_CHECKED_ON`` names, and tests/accounts/test_allauth_pin.py fails on
any other until someone has read them again.
"""

from __future__ import annotations

import functools

from allauth.account import app_settings as account_settings
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.utils import filter_users_by_email, filter_users_by_username
from allauth.core.internal import ratelimit
from django.conf import settings
from django.contrib.auth import backends, get_user_model
from django.contrib.sites.shortcuts import get_current_site

from portal.compiled import Compiled

# The allauth release whose internals the adapter below was written against (requirements.txt pins it).
PRIVATE_API_CHECKED_ON = {"django-allauth": "65.21.1"}
RATE_APP = "allauth.account"
FAILED = "login_failed"


def named_accounts(credentials: dict) -> list[int]:
    """The primary keys of every account a login attempt's password is checked against: the
    accounts whose username (in any letter case) or whose e-mail address (any of theirs, verified
    or not, in any case) is what was typed. allauth passes the text as ``username`` and, when it
    looks like an address, as ``email`` too, and its backend tries each as both: so does this."""
    typed = {value for key in ("username", "email") if (value := credentials.get(key))}
    pks: set[int] = set()
    for text in typed:
        pks.update(filter_users_by_username(text).values_list("pk", flat=True))
        pks.update(user.pk for user in filter_users_by_email(text))
    return sorted(pks)


def _failed_rates(per: str) -> dict[str, str]:
    """A rate-limit config of ``ACCOUNT_RATE_LIMITS["login_failed"]``'s rates counted ``per`` ip or
    key only (the same rates, so the same counters as allauth's)."""
    parts = (account_settings.RATE_LIMITS.get(FAILED) or "").split(",")
    return {FAILED: ",".join(p for p in parts if p.strip() and ratelimit.parse_rate(p.strip()).per == per)}


def _per_account(request, pk: int) -> dict:
    """Where one account's failed logins are counted, however the login spelled it."""
    key = f"{get_current_site(request).domain}:user:{pk}"
    return {"app": RATE_APP, "action": FAILED, "config": _failed_rates("key"), "key": key}


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        return settings.TOLLGATE_SIGNUP

    def pre_authenticate(self, request, **credentials) -> None:
        """Before a password is checked: one failure more for the client's address, and one more
        for *each* account the login names (``ACCOUNT_RATE_LIMITS["login_failed"]``, per ip and per
        key). Any of them at its limit refuses the attempt unchecked. So an account gets its five
        guesses whether typed as its username, in other letters, or as an address it shares with
        other accounts: a guess at a shared address is checked against each account on it, so it
        counts against each, and one locked account locks the address. A login that names no
        account is counted under the text typed, as allauth does. allauth's ``authenticate`` rolls
        the counts back when the password was right."""
        pks = named_accounts(credentials)
        if not pks:
            super().pre_authenticate(request, **credentials)
            return
        per_ip = ratelimit.consume(request, app=RATE_APP, action=FAILED, config=_failed_rates("ip"))
        if per_ip is None:
            raise self.validation_error("too_many_login_attempts")
        counted: list = []
        for pk in pks:
            usage = ratelimit.consume(request, **_per_account(request, pk))
            if usage is None:
                # Refused unchecked: the accounts counted so far had no guess checked against them.
                ratelimit.RateLimitUsage(usage=counted).rollback()
                raise self.validation_error("too_many_login_attempts")
            counted.extend(usage.usage)
        self._login_failed_rl_usage = ratelimit.RateLimitUsage(usage=per_ip.usage + counted)

    def _delete_login_attempts_cached_email(self, request, **credentials) -> None:
        """After a password reset by mail, allauth forgets the failures counted under each of the
        account's addresses: the failures counted against the accounts on them go too."""
        super()._delete_login_attempts_cached_email(request, **credentials)
        for pk in named_accounts(credentials):
            ratelimit.clear(request, **_per_account(request, pk))


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
