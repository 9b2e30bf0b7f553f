"""A ShareLink (a read-only capability URL to one run's report or to a compare view of runs of one
project) and its ShareViews (one row per request that used it)."""

from __future__ import annotations

from uuid import uuid4

from django.conf import settings
from django.db import models
from django.utils import timezone

NOTE_MAX = 200
USER_AGENT_MAX = 300


class ShareLink(models.Model):
    class Kind(models.TextChoices):
        RUN = "run"
        COMPARE = "compare"

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="share_links")
    # Kept when the account goes: the link is the project's, its history stays readable.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="share_links"
    )
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.RUN)
    # kind run: the run; kind compare: the runs' codes in the compare view's order (run 1 the reference).
    run = models.ForeignKey("runs.Run", models.CASCADE, null=True, blank=True, related_name="share_links")
    run_codes = models.JSONField(default=list, blank=True)
    note = models.CharField(max_length=NOTE_MAX, blank=True)
    # sha256 hex of the token: the token itself is shown once and never stored.
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    view_count = models.PositiveIntegerField(default=0)
    last_viewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]
        indexes = [
            # The project's list of links (/shares/), newest first.
            models.Index(fields=["project", "-created"], name="share_project_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind="compare", run__isnull=True)
                | models.Q(kind="run", run__isnull=False),
                name="share_kind_matches_run",
            ),
        ]

    def __str__(self) -> str:
        return f"ShareLink {self.code} ({self.kind})"

    @property
    def is_expired(self) -> bool:
        return timezone.now() >= self.expires_at

    @property
    def state(self) -> str:
        """active, expired or revoked (revoked wins: it was a decision)."""
        if self.revoked_at:
            return "revoked"
        return "expired" if self.is_expired else "active"


class ShareView(models.Model):
    """One use of a link: when, from which network (IPv4 /24, IPv6 /48), with which user agent."""

    link = models.ForeignKey(ShareLink, models.CASCADE, related_name="views")
    at = models.DateTimeField(auto_now_add=True)
    ip = models.CharField(max_length=64, blank=True)
    user_agent = models.CharField(max_length=USER_AGENT_MAX, blank=True)
    # page, report.json, report.csv, status.json, compare.json
    what = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            # A link's views, newest first.
            models.Index(fields=["link", "-at"], name="shareview_link_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.what} {self.ip}"
