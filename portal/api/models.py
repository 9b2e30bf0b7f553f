"""API tokens: per user and project, named, scoped read or run, stored only as a SHA-256 digest."""

from __future__ import annotations

from uuid import uuid4

from django.conf import settings
from django.db import models
from django.db.models import Q


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read (GET only)"
        RUN = "run", "run (read, start, cancel and share runs)"

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="api_tokens")
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    # sha256 hex of the whole token: a lookup by digest compares nothing secret in Python, and a
    # stolen database holds no usable token.
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)  # "tg_" and a few characters, for lists
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)  # written at most once a minute
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            # The tokens page and `tollgate token list --user`: a user's tokens, newest first.
            models.Index(fields=["user", "-created"], name="apitoken_user_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(scope__in=["read", "run"]), name="apitoken_scope_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.scope})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
