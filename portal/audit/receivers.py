"""Security events from Django's and allauth's signals into the audit log."""

from __future__ import annotations

from allauth.account import signals as account_signals
from allauth.mfa import signals as mfa_signals
from django.contrib.auth import signals as auth_signals
from django.dispatch import receiver

from portal.audit.log import record
from portal.audit.models import AuditEvent

Kind = AuditEvent.Kind


@receiver(auth_signals.user_logged_in, dispatch_uid="audit-login")
def logged_in(sender, request, user, **kwargs) -> None:
    record(request, Kind.LOGIN, actor=user)


@receiver(auth_signals.user_logged_out, dispatch_uid="audit-logout")
def logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        record(request, Kind.LOGOUT, actor=user)


@receiver(auth_signals.user_login_failed, dispatch_uid="audit-login-failed")
def login_failed(sender, credentials, request=None, **kwargs) -> None:
    # Django has already masked the password; keep only what was typed as the login.
    typed = credentials.get("username") or credentials.get("email") or ""
    record(request, Kind.LOGIN_FAILED, actor=None, actor_name=str(typed))


@receiver(account_signals.user_signed_up, dispatch_uid="audit-signup")
def signed_up(sender, request, user, **kwargs) -> None:
    record(request, Kind.SIGNUP, actor=user)


@receiver(account_signals.password_changed, dispatch_uid="audit-password-changed")
@receiver(account_signals.password_set, dispatch_uid="audit-password-set")
def password_changed(sender, request, user, **kwargs) -> None:
    record(request, Kind.PASSWORD_CHANGED, actor=user)


@receiver(account_signals.password_reset, dispatch_uid="audit-password-reset")
def password_reset(sender, request, user, **kwargs) -> None:
    record(request, Kind.PASSWORD_RESET, actor=user)


@receiver(account_signals.email_confirmed, dispatch_uid="audit-email-confirmed")
def email_confirmed(sender, request, email_address, **kwargs) -> None:
    record(request, Kind.EMAIL_CONFIRMED, actor=email_address.user)


@receiver(mfa_signals.authenticator_added, dispatch_uid="audit-mfa-added")
def mfa_added(sender, request, user, authenticator, **kwargs) -> None:
    record(request, Kind.MFA_ADDED, actor=user, type=authenticator.type)


@receiver(mfa_signals.authenticator_removed, dispatch_uid="audit-mfa-removed")
def mfa_removed(sender, request, user, authenticator, **kwargs) -> None:
    record(request, Kind.MFA_REMOVED, actor=user, type=authenticator.type)
