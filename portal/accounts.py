"""The account adapter of django-allauth: sign-up is the operator's switch (TOLLGATE_SIGNUP)."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        return settings.TOLLGATE_SIGNUP


def signup_context(request) -> dict:
    """Template context: whether the login page offers sign-up."""
    return {"signup_open": settings.TOLLGATE_SIGNUP}
