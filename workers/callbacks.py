"""Callbacks: when a run of a scenario with a ``callback_url`` ends, POST its verdict there, signed.

The body (docs/ci.md, "Callbacks") carries the run's status, headline, costs, budgets and links; it
is signed like a webhook (``X-Tollgate-Timestamp`` + ``X-Tollgate-Signature``) with the current
secret of the scenario's webhook trigger, so a CI verifies the callback with the secret it already
holds. No webhook, no callback: the attempt is logged as failed and says so.

It is sent by ``portal.delivery``, the sender of every signed outbound POST (alerts too): the URL
goes through the outbound address policy on every attempt and the POST connects to the address
checked, so a receiver outside ``TOLLGATE_ALLOW_NETWORKS`` is refused and logged, never contacted;
a 5xx, 408, 429 or a network error is retried by the task after the one rule's backoff. Each attempt
is one ``CallbackDelivery`` row.
"""

from __future__ import annotations

import logging

from django.db import transaction

from portal import delivery, vault
from portal.hooks import services as hooks
from portal.hooks.models import CallbackDelivery, WebhookDelivery
from portal.lib.report import evidence
from portal.lib.security import hooks as webhooks
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from workers.celery_app import app

log = logging.getLogger(__name__)
TASK = "workers.tasks.deliver_callback"
# The maintenance worker takes it: run workers are busy for a whole run, callbacks must not wait.
QUEUE = "maintenance"
Status = CallbackDelivery.Status


def schedule(run: Run) -> bool:
    """Enqueue the callback of a run that has ended, when its scenario has a callback URL."""
    if run.scenario_id is None:
        return False
    url = Scenario.objects.filter(pk=run.scenario_id).values_list("callback_url", flat=True).first()
    if not url:
        return False
    # Once the run's end is committed (finish ends a run in one transaction): the task must read the
    # final status, summary and budgets.
    transaction.on_commit(lambda: _enqueue(run.pk))
    return True


def _enqueue(run_id: int) -> None:
    try:
        app.send_task(TASK, args=[run_id], queue=QUEUE)
    except Exception:  # the run's own record is final already; a lost callback is logged, not fatal
        log.exception("run %s: could not enqueue its callback", run_id)


def links(run: Run) -> dict:
    """The links the webhook answered with (a run it started), else a new share link."""
    answered = WebhookDelivery.objects.filter(run=run, status_code=202).exclude(response_enc="")
    started = answered.order_by("pk").first()
    # Made by the system (no user): the run's owner may have left the project since.
    found = vault.unseal(started.response_enc) if started else hooks.run_links(run, None)
    return {key: found[key] for key in ("report_url", "share_url", "status_url")}


def payload(run: Run) -> dict:
    summary = run.summary or {}
    scenario = run.scenario
    return {
        "run_id": str(run.code),
        "status": run.status,
        # As the API's status_line and the CLI say it: "incomplete: no cost could be computed — …".
        "status_line": evidence.status_text(
            run.status, run.error, evidence.summary_badge(run.status, summary)
        ),
        "error": run.error or None,
        "headline": summary.get("headline"),
        "answers": summary.get("answers") or [],
        "costs": summary.get("costs") or [],
        "budgets": summary.get("budgets"),
        "scenario": {"id": str(scenario.code), "name": scenario.name, "version": run.scenario_version},
        "links": links(run),
    }


def _sealed_payload(run: Run, row: CallbackDelivery) -> dict:
    """Every attempt sends the same body (one share link, not one per attempt)."""
    first = CallbackDelivery.objects.filter(run=run).exclude(payload_enc="").order_by("attempt").first()
    if first is not None:
        return vault.unseal(first.payload_enc)
    data = payload(run)
    row.payload_enc = vault.seal(data)
    row.save(update_fields=["payload_enc"])
    return data


def deliver(run_id: int, attempt: int) -> int | None:
    """Make attempt ``attempt`` (1-based). Returns the seconds to wait before the next attempt, or
    None when there is none (delivered, refused, or out of attempts). A redelivered task whose
    attempt is already decided does nothing."""
    run = Run.objects.select_related("scenario", "owner").filter(pk=run_id).first()
    if run is None or run.scenario is None or not run.scenario.callback_url:
        return None
    if CallbackDelivery.objects.filter(run=run, status=Status.DELIVERED).exists():
        return None
    url = run.scenario.callback_url
    row, _ = CallbackDelivery.objects.get_or_create(run=run, attempt=attempt, defaults={"url": url})
    if row.status != Status.PENDING:
        return None
    secret = hooks.signing_secret(run.scenario)
    if secret is None:
        delivery.end(row, Status.FAILED, delivery.NO_SECRET)
        return None
    return delivery.post(row, url, lambda: webhooks.canonical(_sealed_payload(run, row)), secret)
