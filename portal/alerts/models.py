"""A project's alert channels, the alert of a judged run (one message, sealed) and every attempt to
deliver it to a channel."""

from __future__ import annotations

import hashlib
from uuid import uuid4

from django.conf import settings
from django.db import models

from portal.delivery import Attempt


class AlertChannel(models.Model):
    class Kind(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Incoming webhook (Slack, Microsoft Teams)"
        CALLBACK = "callback", "Signed callback (the scenario's webhook secret signs it)"

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="alert_channels")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # What the pages show: the e-mail address, or the URL with its path hidden
    # ("https://hooks.slack.com/…"): an incoming webhook's path is its credential.
    target = models.CharField(max_length=500)
    # The URL POSTed to, encrypted (portal.vault); checked by the outbound address policy when saved
    # and again at every attempt. Empty for e-mail.
    url_enc = models.TextField(blank=True)
    # sha256 of the address or URL: one channel per destination and project.
    fingerprint = models.CharField(max_length=64)
    improvements = models.BooleanField(default=False)  # also alert when a run improved
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "target"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "kind", "fingerprint"], name="alertchannel_target_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.target}"

    @staticmethod
    def shown(kind: str, destination: str) -> str:
        """What a page may show of ``destination``: an address as it is, a URL without its path."""
        if kind == AlertChannel.Kind.EMAIL:
            return destination
        scheme, _, rest = destination.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0]}/…"

    @staticmethod
    def fingerprint_of(destination: str) -> str:
        return hashlib.sha256(destination.encode()).hexdigest()


class AlertSettings(models.Model):
    """A project's alert settings; none stored: the defaults."""

    project = models.OneToOneField("projects.Project", models.CASCADE, related_name="alert_settings")
    # Alerts carry a read-only share link of the compare (for recipients without an account).
    share_links = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"alert settings of {self.project_id}"


class Alert(models.Model):
    """The message of one judged run, composed once and sent the same to every channel."""

    judgement = models.OneToOneField("judgements.Judgement", models.CASCADE, related_name="alert")
    subject = models.CharField(max_length=300)
    # {"text", "callback", "links"}, sealed (portal.vault): it may hold a share link's token.
    payload_enc = models.TextField()
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.subject


class AlertDelivery(Attempt):
    """One attempt to deliver an alert to a channel (kind and target copied: the log outlives it);
    sent by ``portal.delivery`` like every signed outbound POST."""

    alert = models.ForeignKey(Alert, models.CASCADE, related_name="deliveries")
    channel = models.ForeignKey(AlertChannel, models.SET_NULL, null=True, related_name="deliveries")
    kind = models.CharField(max_length=8, choices=AlertChannel.Kind.choices)
    target = models.CharField(max_length=500)

    class Meta(Attempt.Meta):
        indexes = [
            # The scenario page's delivery log: an alert's attempts, newest first.
            models.Index(fields=["alert", "-created"], name="alertdelivery_created_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["alert", "channel", "attempt"], name="alertdelivery_attempt_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.target} #{self.attempt}: {self.status}"

    def described(self) -> str:
        return f"alert {self.alert_id} to {self.kind} {self.target}"
