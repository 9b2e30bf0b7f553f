"""portal/accounts.py's private-API code is pinned to the allauth release it was written for.

The per-account lock-out overrides ``DefaultAccountAdapter.pre_authenticate`` and
``_delete_login_attempts_cached_email``, sets ``_login_failed_rl_usage`` (which allauth's
``authenticate`` rolls back after a right password) and counts through
``allauth.core.internal.ratelimit``. None of that is a public API: an upgrade could break the lock-out
silently (a guess more per spelling, or none refused). These tests fail on any other release until
someone has read the code again and moved ``PRIVATE_API_CHECKED_ON``.
"""

from __future__ import annotations

import inspect
import re

import allauth
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.internal.flows import password_reset
from allauth.core.internal import ratelimit

from portal import accounts
from tests.conftest import ROOT

RECHECK = (
    "portal/accounts.py was written for allauth {pinned}, this is {running}: read "
    "DefaultAccountAdapter.authenticate / pre_authenticate / _rollback_login_failed_rl_usage / "
    "_delete_login_attempts_cached_email and allauth/core/internal/ratelimit.py (consume, clear, "
    "parse_rate, RateLimitUsage) of the new release, run tests/accounts, then move PRIVATE_API_CHECKED_ON"
)


def test_allauth_is_the_release_the_lock_out_was_written_for():
    pinned = accounts.PRIVATE_API_CHECKED_ON["django-allauth"]
    assert allauth.__version__ == pinned, RECHECK.format(pinned=pinned, running=allauth.__version__)
    requirement = re.search(r"^django-allauth\[mfa\]==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert requirement and requirement.group(1) == pinned, "requirements.txt pins another allauth"


def test_the_private_parts_the_lock_out_uses_are_there_with_their_shapes():
    # allauth checks the password between these two and rolls back what pre_authenticate consumed.
    source = inspect.getsource(DefaultAccountAdapter.authenticate)
    assert source.index("self.pre_authenticate(") < source.index("self._rollback_login_failed_rl_usage()")
    rollback = inspect.getsource(DefaultAccountAdapter._rollback_login_failed_rl_usage)
    assert 'getattr(self, "_login_failed_rl_usage"' in rollback
    # A password reset forgets the failures counted under each of the account's addresses.
    assert "_delete_login_attempts_cached_email(request, email=" in inspect.getsource(password_reset)
    for function in (ratelimit.consume, ratelimit.clear):
        assert {"app", "action", "config", "key"} <= set(inspect.signature(function).parameters)
    assert ratelimit.parse_rate("5/5m/key").per == "key" and ratelimit.parse_rate("10/m/ip").per == "ip"
    assert callable(ratelimit.RateLimitUsage(usage=[]).rollback)
