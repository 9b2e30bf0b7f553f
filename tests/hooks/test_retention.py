"""Logs callers can grow stay bounded: refused webhook deliveries are stored at most
TOLLGATE_WEBHOOK_REFUSED_LOG_PER_MINUTE a minute per trigger, and refused deliveries and share views
older than TOLLGATE_LOG_RETENTION_DAYS are pruned (daily, from beat, on the maintenance queue)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from portal.hooks import services
from portal.hooks.models import WebhookDelivery
from portal.lib.security import hooks as webhooks
from portal.projects.models import personal_project
from portal.runs import starting
from portal.sharing.models import ShareLink, ShareView
from portal.sharing.services import create_share
from tests.runs.factories import make_run
from workers import retention, tasks
from workers.celery_app import app

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(owner):
    scenario = starting.save_scenario(
        personal_project(owner), "ci", {"plain_url": "http://127.0.0.1:9/1k", "arms": ["plain"]}
    )
    trigger, secret = services.create_trigger(scenario, owner)
    return trigger, secret, urlsplit(services.webhook_url(trigger)).path


def deliver(client, path: str, secret: str, body: bytes = b"{}"):
    stamp = str(int(time.time()))
    return client.post(
        path,
        body,
        content_type="application/json",
        HTTP_X_TOLLGATE_TIMESTAMP=stamp,
        HTTP_X_TOLLGATE_SIGNATURE=webhooks.signature(secret, stamp, body),
    )


def test_a_flood_of_forged_calls_is_answered_but_stored_only_up_to_the_cap(client, hook, settings):
    trigger, secret, path = hook
    settings.TOLLGATE_WEBHOOK_REFUSED_LOG_PER_MINUTE = 3
    for _ in range(6):
        assert deliver(client, path, "not-the-secret").status_code == 401
    assert WebhookDelivery.objects.filter(trigger=trigger, status_code=401).count() == 3
    # A real caller is never crowded out: accepted deliveries are always stored.
    started = deliver(client, path, secret, json.dumps({"idempotency_key": "k1"}).encode())
    assert started.status_code == 202, started.content
    assert WebhookDelivery.objects.filter(trigger=trigger, status_code=202).count() == 1


def test_old_refused_deliveries_and_share_views_are_pruned(client, hook, owner, settings):
    trigger, secret, path = hook
    settings.TOLLGATE_LOG_RETENTION_DAYS = 90
    assert deliver(client, path, "forged").status_code == 401
    assert deliver(client, path, secret, json.dumps({"idempotency_key": "k"}).encode()).status_code == 202
    assert deliver(client, path, "forged again").status_code == 401
    old = timezone.now() - timedelta(days=91)
    refused_old, refused_new = WebhookDelivery.objects.filter(status_code=401).order_by("pk")
    WebhookDelivery.objects.filter(pk__in=[refused_old.pk]).update(received_at=old)
    WebhookDelivery.objects.filter(status_code=202).update(received_at=old)  # old, but accepted

    link, token = create_share(owner, run=make_run(owner))
    for _ in range(3):  # views of the page: each logged (status.json polls would coalesce)
        assert client.get(f"/s/{token}/").status_code == 200
    first_view = ShareView.objects.filter(link=link).order_by("pk").first()
    ShareView.objects.filter(pk=first_view.pk).update(at=old)

    assert retention.prune_logs() == {"webhook_deliveries": 1, "share_views": 1}
    assert list(WebhookDelivery.objects.order_by("pk").values_list("pk", flat=True)) == sorted(
        [WebhookDelivery.objects.get(status_code=202).pk, refused_new.pk]
    )
    assert ShareView.objects.filter(link=link).count() == 2
    assert ShareLink.objects.get(pk=link.pk).view_count == 3  # the link's own count stays
    assert retention.prune_logs() == {"webhook_deliveries": 0, "share_views": 0}


def test_pruning_runs_daily_on_the_maintenance_queue():
    entry = app.conf.beat_schedule["prune-logs"]
    assert entry["task"] == "workers.tasks.prune_logs" and entry["schedule"] == 24 * 3600.0
    assert app.conf.task_routes["workers.tasks.prune_logs"] == {"queue": "maintenance"}
    assert tasks.prune_logs.name == "workers.tasks.prune_logs"
