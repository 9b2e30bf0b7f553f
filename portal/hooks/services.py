"""Webhook triggers of saved scenarios. The scenario CLI and pages create triggers through here; the
receiving view and the callback task read their secrets through here.

A secret is generated here, returned once to be shown, and stored only encrypted (``portal.vault``).
Rotating keeps the previous secret valid for ``TOLLGATE_WEBHOOK_GRACE_HOURS`` (default 24), so a CI
can switch over without a failed build; callbacks are signed with the current secret.
"""

from __future__ import annotations

import secrets as secretlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from portal import vault
from portal.hooks.models import CallbackDelivery, WebhookDelivery, WebhookTrigger
from portal.runs.models import Run
from portal.sharing import services as sharing


def new_secret() -> str:
    """256 random bits, URL- and shell-safe."""
    return "whsec_" + secretlib.token_urlsafe(32)


def create_trigger(scenario, user) -> tuple[WebhookTrigger, str]:
    """A webhook trigger for ``scenario`` (runs it starts belong to ``user``); an existing one is
    kept, its secret rotated. Returns ``(trigger, secret)``; the secret is shown once."""
    with transaction.atomic():
        trigger = WebhookTrigger.objects.select_for_update().filter(scenario=scenario).first()
        if trigger is not None:
            if trigger.created_by_id != user.pk:
                trigger.created_by = user
                trigger.save(update_fields=["created_by"])
            return trigger, rotate(trigger)
        secret = new_secret()
        trigger = WebhookTrigger.objects.create(
            scenario=scenario, created_by=user, secret_enc=vault.encrypt(secret)
        )
    return trigger, secret


def rotate(trigger: WebhookTrigger) -> str:
    """A new secret; the old one keeps verifying for the grace period. Returns the new secret."""
    now = timezone.now()
    secret = new_secret()
    trigger.previous_secret_enc = trigger.secret_enc
    trigger.previous_valid_until = now + timedelta(hours=settings.TOLLGATE_WEBHOOK_GRACE_HOURS)
    trigger.secret_enc = vault.encrypt(secret)
    trigger.rotated_at = now
    trigger.save(update_fields=["previous_secret_enc", "previous_valid_until", "secret_enc", "rotated_at"])
    return secret


def webhook_url(trigger: WebhookTrigger, request=None) -> str:
    """Absolute URL a CI posts to."""
    return absolute(reverse("hooks-receive", args=[trigger.public_id]), request)


def absolute(path: str, request=None) -> str:
    return request.build_absolute_uri(path) if request is not None else settings.TOLLGATE_BASE_URL + path


def verifying_secrets(trigger: WebhookTrigger, now=None) -> list[str]:
    """The secrets a delivery may be signed with: the current one, then the previous one while its
    grace period lasts."""
    now = now or timezone.now()
    found = [vault.decrypt(trigger.secret_enc)]
    if trigger.previous_secret_enc and trigger.previous_valid_until and trigger.previous_valid_until > now:
        found.append(vault.decrypt(trigger.previous_secret_enc))
    return found


def signing_secret(scenario) -> str | None:
    """The secret that signs the scenario's callbacks: its webhook's current one (None: no webhook)."""
    trigger = WebhookTrigger.objects.filter(scenario=scenario).first()
    return vault.decrypt(trigger.secret_enc) if trigger is not None else None


def run_links(run: Run, user, request=None) -> dict:
    """What a caller without a session needs to follow a run: its page and report (for members),
    and a new read-only share link with its status JSON (capabilities, no login)."""
    _link, token = sharing.create_share(user, run=run)
    return {
        "run_id": str(run.code),
        "run_url": absolute(reverse("runs-detail", args=[run.code]), request),
        "status_url": sharing.status_url(token, request),
        "report_url": absolute(reverse("runs-report-json", args=[run.code]), request),
        "share_url": sharing.share_url(token, request),
    }


def grace_hours() -> int:
    return settings.TOLLGATE_WEBHOOK_GRACE_HOURS


def rotate_stored_secrets() -> int:
    """Re-encrypt every stored webhook secret and sealed answer or callback body with the newest
    key (``tollgate rotate-secrets``, inside its transaction); raises ``vault.SecretError``.
    Returns how many webhooks were re-encrypted."""
    count = 0
    for trigger in WebhookTrigger.objects.select_for_update().only("pk", "secret_enc", "previous_secret_enc"):
        previous = vault.rotate(trigger.previous_secret_enc) if trigger.previous_secret_enc else ""
        WebhookTrigger.objects.filter(pk=trigger.pk).update(
            secret_enc=vault.rotate(trigger.secret_enc), previous_secret_enc=previous
        )
        count += 1
    for model, name in ((WebhookDelivery, "response_enc"), (CallbackDelivery, "payload_enc")):
        for pk, token in model.objects.exclude(**{name: ""}).values_list("pk", name):
            model.objects.filter(pk=pk).update(**{name: vault.rotate(token)})
    return count
