"""Delivering an alert to one channel, one attempt per call (``workers.tasks.deliver_alert``).

- e-mail: Django's mail (``EMAIL_*`` settings: the operator's SMTP server, or the console in the
  demo); the subject names the judgement, the body is the alert's text;
- incoming webhook (Slack, Microsoft Teams): ``{"text": …}`` POSTed as JSON;
- signed callback: the alert's JSON, signed like the scenario's callbacks (``X-Tollgate-Timestamp``
  + ``X-Tollgate-Signature`` with its webhook's current secret; no webhook, no signature: not sent).

A POST goes through ``portal.delivery``, the sender of every signed outbound POST: the outbound
address policy at every attempt, the address checked, one retry rule (the run callbacks' too). An
e-mail goes to the operator's own SMTP server, never to an address a project chose; a failed SMTP
exchange is retried by the same rule. Each attempt is an ``AlertDelivery`` row.
"""

from __future__ import annotations

import smtplib

from django.core.mail import send_mail
from django.utils import timezone

from portal import delivery
from portal.alerts.models import Alert, AlertChannel, AlertDelivery
from portal.alerts.services import destination, payload
from portal.hooks import services as hooks
from portal.lib.security import hooks as webhooks
from portal.lib.watching import alerts as alertlib

Status = AlertDelivery.Status
Kind = AlertChannel.Kind


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
    data = payload(alert)
    if channel.kind == Kind.EMAIL:
        return _email(row, alert.subject, data["text"])
    if channel.kind != Kind.CALLBACK:  # an incoming webhook (Slack, Teams): its URL is its credential
        return delivery.post(
            row, destination(channel), webhooks.canonical(alertlib.incoming_webhook(data["text"]))
        )
    secret = hooks.signing_secret(alert.judgement.scenario)
    if secret is None:
        delivery.end(row, Status.FAILED, delivery.NO_SECRET)
        return None
    return delivery.post(row, destination(channel), webhooks.canonical(data["callback"]), secret)


def _email(row: AlertDelivery, subject: str, text: str) -> int | None:
    row.sent_at = timezone.now()
    try:
        send_mail(subject, text, None, [row.target])
    except (smtplib.SMTPException, OSError) as exc:
        return delivery.failed(row, f"e-mail not sent: {type(exc).__name__}", None)
    delivery.delivered(row)
    return None
