"""A scenario's webhook trigger, the deliveries it received and the callbacks sent when runs end."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q

from portal.delivery import Attempt


def new_public_id() -> str:
    """The unguessable part of the webhook URL: 192 random bits."""
    return secrets.token_urlsafe(24)


class WebhookTrigger(models.Model):
    """One per scenario. The secret is stored encrypted (``portal.vault``) and shown once; after a
    rotation the previous secret keeps verifying until ``previous_valid_until``."""

    class Format(models.TextChoices):
        TOLLGATE = "tollgate", "Tollgate (X-Tollgate-Timestamp + X-Tollgate-Signature)"
        GITHUB = "github", "GitHub (X-Hub-Signature-256 + X-GitHub-Delivery)"

    scenario = models.OneToOneField("scenarios.Scenario", models.CASCADE, related_name="webhook")
    public_id = models.CharField(max_length=64, unique=True, default=new_public_id, editable=False)
    secret_enc = models.TextField()
    previous_secret_enc = models.TextField(blank=True)
    previous_valid_until = models.DateTimeField(null=True, blank=True)
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.TOLLGATE)
    # Runs it may start per minute (deliveries answered 202 in the last 60 s).
    rate_per_minute = models.PositiveIntegerField(default=6)
    # Owner of the runs it starts; must still be a member (or owner) of the scenario's project.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="webhooks")
    created = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"webhook of {self.scenario}"


class WebhookDelivery(models.Model):
    """One request to a trigger's URL, whatever was answered (refusals too)."""

    trigger = models.ForeignKey(WebhookTrigger, models.CASCADE, related_name="deliveries")
    received_at = models.DateTimeField(auto_now_add=True)
    status_code = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=300)  # "started", "idempotent repeat", or why it was refused
    idempotency_key = models.CharField(max_length=200, blank=True)
    # sha256 of the signature header (a verified one only): a signature used before is a replay.
    signature_digest = models.CharField(max_length=64, blank=True)
    run = models.ForeignKey("runs.Run", models.SET_NULL, null=True, blank=True, related_name="+")
    # The 202 answer (it holds the share link's token: sealed), given back on an idempotent repeat.
    response_enc = models.TextField(blank=True)
    ip = models.CharField(max_length=64, blank=True)  # the client's network: IPv4 /24, IPv6 /48
    body_bytes = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-received_at", "-id"]
        indexes = [
            # Delivery log (last 50) and the rate limit (a trigger's deliveries of the last minute).
            models.Index(fields=["trigger", "-received_at"], name="hookdelivery_trigger_time_idx"),
            # Replay check of every verified delivery: was this signature answered before?
            models.Index(
                fields=["trigger", "signature_digest"],
                condition=~Q(signature_digest=""),
                name="hookdelivery_signature_idx",
            ),
        ]
        constraints = [
            # A signature starts at most one run; a key at most one run.
            models.UniqueConstraint(
                fields=["trigger", "signature_digest"],
                condition=Q(status_code=202) & ~Q(signature_digest=""),
                name="hookdelivery_signature_uniq",
            ),
            models.UniqueConstraint(
                fields=["trigger", "idempotency_key"],
                condition=Q(status_code=202) & ~Q(idempotency_key=""),
                name="hookdelivery_idempotency_uniq",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.status_code} {self.outcome}"


class CallbackDelivery(Attempt):
    """One attempt to POST a finished run's callback (``portal.delivery``, as every signed outbound
    POST)."""

    run = models.ForeignKey("runs.Run", models.CASCADE, related_name="callbacks")
    url = models.URLField(max_length=500)
    # The body sent (sealed: it holds share and status links); every attempt sends the same one.
    payload_enc = models.TextField(blank=True)

    class Meta(Attempt.Meta):
        indexes = [
            # The scenario page's callback log: a run's attempts, newest first.
            models.Index(fields=["run", "-created"], name="callback_run_created_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "attempt"], name="callback_run_attempt_uniq"),
        ]

    def __str__(self) -> str:
        return f"callback {self.attempt} of run {self.run_id}: {self.status}"

    def described(self) -> str:
        return f"callback of run {self.run_id}"
