"""``POST /hooks/<public_id>``: a signed request starts a run of the trigger's scenario.

No session, no CSRF token: the unguessable id finds the trigger, the HMAC proves the caller holds
its secret. The order of the checks (docs/ci.md, "What the webhook answers"): size (413), disabled
(403), signature and timestamp (401), body (400), then — holding the trigger's row lock, so two concurrent
deliveries take turns — replay (409), idempotency key (200 with the first answer), rate (429),
the creator's membership (403) and the run's own validation (400). Every delivery of a known
trigger is logged with its outcome, refusals included.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from portal import vault
from portal.audit.log import client_network
from portal.hooks import services
from portal.hooks.models import WebhookDelivery, WebhookTrigger
from portal.lib.security import hooks as webhooks
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.runs import starting

log = logging.getLogger(__name__)
BODY_KEYS = ("overrides", "idempotency_key")
RATE_WINDOW_S = 60
ACCEPTED = (200, 202)  # a run started, or the first run of a repeated idempotency key
PUBLIC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # secrets.token_urlsafe's alphabet, the column's length


def problem(status: int, detail: str, errors: dict | None = None, headers=None) -> JsonResponse:
    response = JsonResponse({"status": status, "errors": errors or {}, "detail": detail}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


class Delivery:
    """The log row of one delivery, written with the answer."""

    def __init__(self, trigger: WebhookTrigger, request: HttpRequest, body_bytes: int) -> None:
        self.trigger, self.ip, self.body_bytes = trigger, client_network(request), body_bytes
        self.digest = self.key = ""

    def answer(self, response: JsonResponse, outcome: str, run=None, sealed: str = "") -> JsonResponse:
        outcome = storable(outcome)  # for the log file as for the table
        if response.status_code not in ACCEPTED and self.flooded():
            log.warning("webhook %s: %s %s (not stored: refused-delivery log full this minute)",
                        self.trigger.pk, response.status_code, outcome)  # fmt: skip
            return response
        WebhookDelivery.objects.create(
            trigger=self.trigger,
            status_code=response.status_code,
            outcome=outcome[:300],
            idempotency_key=self.key,
            signature_digest=self.digest,
            run=run,
            response_enc=sealed,
            ip=self.ip,
            body_bytes=self.body_bytes,
        )
        log.info("webhook %s: %s %s", self.trigger.pk, response.status_code, outcome)
        return response

    def flooded(self) -> bool:
        """Whether this trigger already logged its quota of refused deliveries in the last minute."""
        since = timezone.now() - timedelta(seconds=RATE_WINDOW_S)
        refused = WebhookDelivery.objects.filter(trigger=self.trigger, received_at__gt=since).exclude(
            status_code__in=ACCEPTED
        )
        return refused.count() >= settings.TOLLGATE_WEBHOOK_REFUSED_LOG_PER_MINUTE

    def refuse(self, status: int, detail: str, errors: dict | None = None, headers=None) -> JsonResponse:
        # The log says why, field by field (the answer went to the caller, not to whoever reads the log).
        said = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in (errors or {}).items())
        return self.answer(problem(status, detail, errors, headers), f"{detail} {said}" if said else detail)


def storable(text: str) -> str:
    """Text as PostgreSQL (and a log file) can hold it: what the caller sent may be quoted in an
    outcome (an unknown key's name), and may hold NUL or a lone surrogate (``"\\u0000"``,
    ``"\\ud800"`` in the JSON)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def read_body(request: HttpRequest) -> tuple[bytes, bool]:
    """At most MAX_BODY_BYTES + 1 bytes of the body, and whether it is too big (the declared
    length is believed first: nothing is read of a body announced too big)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > webhooks.MAX_BODY_BYTES:
        return b"", True
    # A chunked body arrives here with its length already (portal.wsgi reads it first).
    body = request.read(webhooks.MAX_BODY_BYTES + 1)
    return body, len(body) > webhooks.MAX_BODY_BYTES


def parse(body: bytes, github: bool) -> tuple[dict, str]:
    """(overrides, idempotency key) of a Tollgate body; ValueError (with a message) when malformed.
    A GitHub event's body is GitHub's own: it overrides nothing."""
    try:
        data = json.loads(body.decode("utf-8")) if body.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"The body is not JSON: {exc}") from None
    except RecursionError:  # "[[[[…": deeper than Python's json goes
        raise ValueError("The body is JSON nested too deeply to read.") from None
    if github:
        return {}, ""
    if not isinstance(data, dict):
        raise ValueError("The body must be a JSON object.")
    unknown = sorted(set(data) - set(BODY_KEYS))
    if unknown:
        raise ValueError(f"Unknown keys {', '.join(unknown)}; known: {', '.join(BODY_KEYS)}.")
    overrides, key = data.get("overrides") or {}, data.get("idempotency_key") or ""
    if not isinstance(overrides, dict):
        raise ValueError("overrides must be a JSON object of run settings.")
    if not isinstance(key, str) or len(key) > 200 or not key.isprintable():
        # Printable: a NUL or a lone surrogate could be neither stored nor looked up in PostgreSQL.
        raise ValueError("idempotency_key must be a string of at most 200 printable characters.")
    return overrides, key


@csrf_exempt
def receive(request: HttpRequest, public_id: str) -> JsonResponse:
    # Only the alphabet of the ids (models.new_public_id) is looked up: a NUL in the path would
    # reach PostgreSQL, which cannot compare it (a 500), and any other odd text is unknown anyway.
    trigger = (
        WebhookTrigger.objects.select_related("scenario__project", "created_by")
        .filter(public_id=public_id)
        .first()
        if PUBLIC_ID.fullmatch(public_id)
        else None
    )
    if trigger is None:
        return problem(404, "No such webhook.")
    if request.method != "POST":
        refused = Delivery(trigger, request, 0)
        return refused.refuse(405, "POST a signed JSON body (docs/ci.md).", headers={"Allow": "POST"})
    body, too_big = read_body(request)
    delivery = Delivery(trigger, request, len(body))
    if too_big:
        return delivery.refuse(413, f"The body is over {webhooks.MAX_BODY_BYTES} bytes.")
    if not trigger.enabled:
        return delivery.refuse(403, "This webhook is disabled.")
    github = trigger.format == WebhookTrigger.Format.GITHUB
    secrets = services.verifying_secrets(trigger)
    if github:
        verdict = webhooks.verify_github(secrets, request.headers, body)
    else:
        verdict = webhooks.verify_tollgate(secrets, request.headers, body, time.time())
    if not verdict.ok:
        return delivery.refuse(verdict.status, verdict.reason)
    delivery.digest = verdict.digest
    try:
        overrides, key = parse(body, github)
    except ValueError as exc:
        return delivery.refuse(400, str(exc), {"body": [str(exc)]})
    delivery.key = storable(verdict.delivery) if github else key
    if github and request.headers.get("X-GitHub-Event", "") == "ping":
        # GitHub's test delivery when the webhook is added: proves the secret, starts nothing.
        return delivery.answer(JsonResponse({"status": 200, "detail": "pong"}), "ping")
    with transaction.atomic():
        # Deliveries of one trigger take turns from here: replay, idempotency and rate are decided
        # on what the ones before have committed.
        WebhookTrigger.objects.select_for_update().filter(pk=trigger.pk).first()
        return _decide(request, trigger, delivery, overrides, github)


def _decide(request, trigger: WebhookTrigger, delivery: Delivery, overrides: dict, github: bool):
    used = WebhookDelivery.objects.filter(trigger=trigger, status_code__in=(200, 202))
    # GitHub redelivers with the same id, body and signature: the id answers it first. Tollgate's
    # format signs a timestamp, so a repeat that is meant re-signs; an identical one is a replay.
    if not github and used.filter(signature_digest=delivery.digest).exists():
        return delivery.refuse(409, "Replayed: this signature was used before.")
    if delivery.key:
        first = used.filter(status_code=202, idempotency_key=delivery.key).order_by("pk").first()
        if first is not None:
            answer = JsonResponse(vault.unseal(first.response_enc), status=200)
            return delivery.answer(answer, "idempotent repeat", run=first.run)
    if github and used.filter(signature_digest=delivery.digest).exists():
        return delivery.refuse(409, "Replayed: this signature was used before.")
    refused = _over_rate(trigger) or _creator_refused(trigger)
    if refused is not None:
        return delivery.refuse(*refused)
    try:
        scenario = trigger.scenario
        run = starting.start_run(
            trigger.created_by, scenario.project, overrides, scenario=scenario, source="webhook"
        )
    except starting.RunRefused as exc:
        return delivery.refuse(400, "The run was refused; see errors.", exc.errors)
    links = services.run_links(run, trigger.created_by, request)
    return delivery.answer(JsonResponse(links, status=202), "started", run=run, sealed=vault.seal(links))


def _over_rate(trigger: WebhookTrigger) -> tuple | None:
    """(429, detail, errors, headers) when the trigger started ``rate_per_minute`` runs in the last
    minute; Retry-After is when the oldest of them leaves the window."""
    now = timezone.now()
    started = WebhookDelivery.objects.filter(
        trigger=trigger, status_code=202, received_at__gt=now - timedelta(seconds=RATE_WINDOW_S)
    ).values_list("received_at", flat=True)
    times = sorted(started)
    if len(times) < trigger.rate_per_minute:
        return None
    wait_s = RATE_WINDOW_S - (now - times[len(times) - trigger.rate_per_minute]).total_seconds()
    retry = max(1, math.ceil(wait_s))
    detail = f"Over the rate of {trigger.rate_per_minute} runs per minute; retry in {retry} s."
    return 429, detail, None, {"Retry-After": str(retry)}


def _creator_refused(trigger: WebhookTrigger) -> tuple | None:
    user = trigger.created_by
    if user.is_active and can(role_in(user, trigger.scenario.project_id), Role.MEMBER):
        return None
    return (
        403,
        "The webhook's creator may no longer start runs in this project: a member creates it anew.",
    )
