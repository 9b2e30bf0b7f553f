"""The audit log: who did what security-relevant thing, when, from which (truncated) address."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    class Kind(models.TextChoices):
        LOGIN = "login", "Logged in"
        LOGIN_FAILED = "login_failed", "Failed login"
        LOGOUT = "logout", "Logged out"
        SIGNUP = "signup", "Signed up"
        PASSWORD_CHANGED = "password_changed", "Password changed"
        PASSWORD_RESET = "password_reset", "Password reset"
        EMAIL_CONFIRMED = "email_confirmed", "E-mail address confirmed"
        MFA_ADDED = "mfa_added", "Second factor added"
        MFA_REMOVED = "mfa_removed", "Second factor removed"
        MEMBER_ADDED = "member_added", "Member added"
        MEMBER_CHANGED = "member_changed", "Member role changed"
        MEMBER_REMOVED = "member_removed", "Member removed"
        CREDENTIAL_SAVED = "credential_saved", "Credential saved"
        CREDENTIAL_FORGOTTEN = "credential_forgotten", "Credential forgotten"
        TARGET_VERIFIED = "target_verified", "Target verified"
        TARGET_CHANGED = "target_changed", "Target changed"
        QUOTA_REFUSED = "quota_refused", "Refused by a quota"
        SCENARIO_CHANGED = "scenario_changed", "Scenario changed"

    time = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    # What the actor typed to log in when there is no actor (failed logins), at most 150 characters.
    actor_name = models.CharField(max_length=150, blank=True)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    # The client's network, not its address: IPv4 to /24, IPv6 to /48.
    ip = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # The project the event belongs to; a plain integer until the projects app links it.
    project_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [
            # The audit page: newest first, optionally one project's.
            models.Index(fields=["-time"], name="audit_time_idx"),
            models.Index(fields=["project_id", "-time"], name="audit_project_time_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.kind} {self.actor_name}"
