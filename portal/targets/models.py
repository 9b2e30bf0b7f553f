"""What is measured: a Target (the service, reachable over plain HTTP and/or TLS) and saved
Scenarios (how to measure it).

Ownership lives in one place, ``owner`` here and ``portal.runs.access``; a later issue moves it
to projects (tenants) with members.
"""

from __future__ import annotations

from uuid import uuid4

from django.conf import settings
from django.db import models


class Target(models.Model):
    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="targets")
    name = models.CharField(max_length=200)
    plain_url = models.URLField(max_length=500, blank=True)
    tls_url = models.URLField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One target per owner and URL pair: the form reuses it, so runs group by target.
            models.UniqueConstraint(fields=["owner", "plain_url", "tls_url"], name="target_owner_urls_uniq"),
        ]

    def __str__(self) -> str:
        return self.name


class Scenario(models.Model):
    """A saved, reusable measurement recipe. ``config`` holds the form's cleaned values."""

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="scenarios")
    target = models.ForeignKey(Target, models.CASCADE, related_name="scenarios")
    name = models.CharField(max_length=200)
    config = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="scenario_owner_name_uniq"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
