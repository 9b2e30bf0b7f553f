"""Delivering an alert to one channel, one attempt per call (``workers.tasks.deliver_alert``).

- e-mail: Django's mail (``EMAIL_*`` settings: the operator's SMTP server, or the console in the
  demo); the subject names the judgement, the body is the alert's text;
- incoming webhook (Slack, Microsoft Teams): ``{"text": …}`` POSTed as JSON;
- signed callback: the alert's JSON, signed like the scenario's callbacks (``X-Tollgate-Timestamp``
  + ``X-Tollgate-Signature`` with its webhook's current secret; no webhook, no signature: not sent).

Every URL goes through the outbound address policy at every attempt and the POST connects to the
address checked (``portal.lib.security.hooks.post``); an e-mail goes to the operator's own SMTP server,
never to an address a project chose. Each attempt is an ``AlertDelivery`` row. A network error, a
5xx, 408 or 429, or a failed SMTP exchange is retried with exponential backoff
(``TOLLGATE_CALLBACK_BACKOFF_S * 2^(attempt - 1)`` s, ``TOLLGATE_CALLBACK_ATTEMPTS`` in all, as
callbacks); any other answer is final.
"""

from __future__ import annotations

import logging
import smtplib
import time
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from portal import outbound
from portal.alerts.models import Alert, AlertChannel, AlertDelivery
from portal.alerts.services import destination, payload
from portal.hooks import services as hooks
from portal.lib.security import hooks as webhooks
from portal.lib.watching import alerts as alertlib

log = logging.getLogger(__name__)
RETRYABLE = {408, 429}
Status = AlertDelivery.Status
Kind = AlertChannel.Kind


def backoff_s(attempt: int) -> int:
    return settings.TOLLGATE_CALLBACK_BACKOFF_S * 2 ** (attempt - 1)


def _end(row: AlertDelivery, status: str, error: str = "", code: int | None = None) -> None:
    row.status, row.error, row.response_status = status, error[:500], code
    row.save(update_fields=["status", "error", "response_status", "sent_at", "next_attempt_at"])
    log.info(
        "alert %s to %s %s, attempt %s: %s %s", row.alert_id, row.kind, row.target, row.attempt, status, error
    )


def deliver(alert_id: int, channel_id: int, attempt: int) -> int | None:
    """Make attempt ``attempt`` (1-based) of alert ``alert_id`` to channel ``channel_id``. Returns the
    seconds to wait before the next attempt, or None when there is none (delivered, refused, out of
    attempts, or this attempt was made already: a redelivered task)."""
    alert = Alert.objects.select_related("judgement__scenario").filter(pk=alert_id).first()
    channel = AlertChannel.objects.filter(pk=channel_id).first()
    if alert is None or channel is None:
        return None
    done = AlertDelivery.objects.filter(alert=alert, channel=channel)
    if done.filter(status=Status.DELIVERED).exists():
        return None
    row, _ = AlertDelivery.objects.get_or_create(
        alert=alert,
        channel=channel,
        attempt=attempt,
        defaults={"kind": channel.kind, "target": channel.target},
    )
    if row.status != Status.PENDING:
        return None
    row.sent_at = timezone.now()
    data = payload(alert)
    if channel.kind == Kind.EMAIL:
        return _email(row, alert.subject, data["text"])
    body = webhooks.canonical(
        data["callback"] if channel.kind == Kind.CALLBACK else alertlib.incoming_webhook(data["text"])
    )
    headers: dict[str, str] = {}
    if channel.kind == Kind.CALLBACK:
        secret = hooks.signing_secret(alert.judgement.scenario)
        if secret is None:
            _end(row, Status.FAILED, "not sent: the scenario has no webhook, whose secret signs callbacks")
            return None
        headers = webhooks.signed_headers(secret, body, time.time())
    url = destination(channel)
    decision = outbound.check_url(url)
    if not decision.allowed:
        _end(row, Status.FAILED, f"refused by the outbound address policy: {decision.reason}")
        return None
    try:
        code = webhooks.post(url, decision.pinned, body, headers)
    except OSError as exc:
        return _failed(row, str(exc), None)  # webhooks.NO_ANSWER: never the peer's bytes
    if 200 <= code < 300:
        _end(row, Status.DELIVERED, code=code)
        return None
    return _failed(row, f"answered {code}", code)


def _email(row: AlertDelivery, subject: str, text: str) -> int | None:
    try:
        send_mail(subject, text, None, [row.target])
    except (smtplib.SMTPException, OSError) as exc:
        return _failed(row, f"e-mail not sent: {type(exc).__name__}", None)
    _end(row, Status.DELIVERED)
    return None


def _failed(row: AlertDelivery, error: str, code: int | None) -> int | None:
    retryable = code is None or code >= 500 or code in RETRYABLE
    if not retryable or row.attempt >= settings.TOLLGATE_CALLBACK_ATTEMPTS:
        _end(row, Status.FAILED, error + ("" if retryable else " (not retried)"), code)
        return None
    wait_s = backoff_s(row.attempt)
    row.next_attempt_at = timezone.now() + timedelta(seconds=wait_s)
    _end(row, Status.FAILED, f"{error}; retrying in {wait_s} s", code)
    return wait_s
