"""The portal's report-signing keys and the frozen, signed report of each finished run."""

from __future__ import annotations

import json

from django.db import models
from django.db.models import Q
from django.db.models.expressions import ExpressionWrapper

from portal.runs.models import Run


class SigningKey(models.Model):
    """An Ed25519 key pair. Exactly one is active (``retired_at`` null) and signs new reports;
    retired ones stay published so the reports they signed still verify."""

    key_id = models.CharField(
        max_length=16, unique=True
    )  # portal.lib.security.signing.key_id of the public key
    public_key = models.CharField(max_length=64)  # base64 of the raw 32 bytes, published
    # {"ed25519": base64 of the raw private bytes}, sealed with portal.vault (never rendered, never logged).
    private_key_enc = models.TextField()
    created = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created", "pk"]
        constraints = [
            # At most one active key: two workers creating the first key (or rotating at once) cannot
            # both succeed; the loser reads the winner's key (services.active_key).
            models.UniqueConstraint(
                ExpressionWrapper(Q(retired_at__isnull=True), output_field=models.BooleanField()),
                condition=Q(retired_at__isnull=True),
                name="signing_one_active_key",
            ),
        ]

    def __str__(self) -> str:
        return f"report-signing key {self.key_id}{' (retired)' if self.retired_at else ''}"


class FrozenReport(models.Model):
    """A run's report as it was when the run ended, signed once and never recomputed. ``body`` is the
    canonical JSON text (``portal.lib.security.signing.canonical``) with its ``integrity`` block; it is
    kept as text, not jsonb, so its numbers come back exactly as they were signed."""

    run = models.OneToOneField(Run, models.CASCADE, related_name="frozen_report")
    body = models.TextField()
    sha256 = models.CharField(max_length=64)
    key_id = models.CharField(max_length=16)
    signed_at = models.DateTimeField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"frozen report of run {self.run_id} ({self.sha256[:12]}…)"

    def report(self) -> dict:
        """The signed report, ``integrity`` included, as downloaded."""
        return json.loads(self.body)

    @property
    def integrity(self) -> dict:
        """What a page shows of the signature (``templates/signing/integrity.html``), without parsing
        the body."""
        return {
            "sha256": self.sha256,
            "key_id": self.key_id,
            "signed_at": self.signed_at.isoformat(),
            "algorithm": "Ed25519",
        }
