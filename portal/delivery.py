"""One sender for every signed outbound POST (run callbacks, alerts to a callback or an incoming
webhook) and one shape for their delivery logs.

A delivery is one attempt per call, each attempt one row of a model made from ``Attempt`` (its
owner, a run or an alert and its channel, says what is delivered: ``CallbackDelivery`` in
``portal/hooks``, ``AlertDelivery`` in ``portal/alerts``). ``post`` checks the URL against the outbound
address policy at every attempt (``portal.outbound``: refused, the row says why and nothing is sent)
and connects only to the address checked (``portal.lib.security.hooks.post``); a body signed with a
webhook secret is signed again at each attempt (a retry an hour later carries a fresh timestamp).

The one retry rule (``failed``): a network error, a 5xx, 408 or 429 is retried after
``TOLLGATE_CALLBACK_BACKOFF_S * 2^(attempt - 1)`` s, ``TOLLGATE_CALLBACK_ATTEMPTS`` attempts in all;
any other answer is final. The caller's Celery task makes the next attempt after the wait the
attempt returns (``workers.tasks.deliver_callback``, ``deliver_alert``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from portal import outbound
from portal.lib.security import hooks as webhooks

log = logging.getLogger(__name__)
# Answers worth another attempt besides a 5xx: the receiver timed out, or asked us to slow down.
RETRYABLE = {408, 429}
# A callback is signed with its scenario's webhook secret: without a webhook it is not sent.
NO_SECRET = "not sent: the scenario has no webhook, whose secret signs callbacks"  # noqa: S105 - words


class Attempt(models.Model):
    """One attempt to deliver something: its number (1-based), how it ended, when it was sent and
    when the next one is due (a failed attempt that is retried)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"

    attempt = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created", "-id"]

    def described(self) -> str:
        """What is delivered where, for the log (each model says it)."""
        raise NotImplementedError


Status = Attempt.Status


def backoff_s(attempt: int) -> int:
    return settings.TOLLGATE_CALLBACK_BACKOFF_S * 2 ** (attempt - 1)


def end(row: Attempt, status: str, error: str = "", code: int | None = None) -> None:
    """Record how the attempt ended (and log it)."""
    row.status, row.error, row.response_status = status, error[:500], code
    row.save(update_fields=["status", "error", "response_status", "sent_at", "next_attempt_at"])
    log.info("%s, attempt %s: %s %s", row.described(), row.attempt, status, error)


def failed(row: Attempt, error: str, code: int | None) -> int | None:
    """The retry rule: the seconds to wait before the next attempt, or None when there is none
    (an answer not worth repeating, or the last attempt)."""
    retryable = code is None or code >= 500 or code in RETRYABLE
    if not retryable or row.attempt >= settings.TOLLGATE_CALLBACK_ATTEMPTS:
        end(row, Status.FAILED, error + ("" if retryable else " (not retried)"), code)
        return None
    wait_s = backoff_s(row.attempt)
    row.next_attempt_at = timezone.now() + timedelta(seconds=wait_s)
    end(row, Status.FAILED, f"{error}; retrying in {wait_s} s", code)
    return wait_s


def delivered(row: Attempt, code: int | None = None) -> None:
    end(row, Status.DELIVERED, code=code)


def post(row: Attempt, url: str, body: bytes | Callable[[], bytes], secret: str | None = None) -> int | None:
    """Make ``row``'s attempt: POST ``body`` (or what ``body()`` makes, only once the URL is allowed)
    to ``url``, signed with ``secret`` when one is given. Returns the seconds to wait before the
    next attempt, or None when there is none."""
    decision = outbound.check_url(url)
    if not decision.allowed:
        end(row, Status.FAILED, f"refused by the outbound address policy: {decision.reason}")
        return None
    if callable(body):
        try:
            body = body()
        except Exception as exc:
            end(row, Status.FAILED, f"internal error: {type(exc).__name__}: {exc}")
            raise
    row.sent_at = timezone.now()
    headers = {} if secret is None else webhooks.signed_headers(secret, body, time.time())
    try:
        code = webhooks.post(url, decision.pinned, body, headers)
    except OSError as exc:
        return failed(row, str(exc), None)  # webhooks.NO_ANSWER: never the peer's bytes
    if 200 <= code < 300:
        delivered(row, code)
        return None
    return failed(row, f"answered {code}", code)
