"""Through a real Celery worker: the judgement task judges a stored run against its baseline and
enqueues the alert, whose webhook answers 503 twice and then 200; Celery's retries wait 1 s, then
2 s (TOLLGATE_CALLBACK_BACKOFF_S=1 in the worker), measured on the receiver's clock."""

from __future__ import annotations

import json
import time

import pytest

from portal.alerts.models import AlertDelivery
from portal.alerts.services import add_channel
from workers import watch
from workers.celery_app import app


@pytest.mark.django_db(transaction=True)
def test_the_worker_judges_and_retries_the_alert_until_the_webhook_accepts(
    judged, callback_receiver, hooks_worker
):
    scenario, _, run = judged
    callback_receiver.statuses = [503, 503, 200]
    add_channel(scenario.project, "webhook", callback_receiver.url)
    app.send_task(watch.JUDGE_TASK, args=[run.pk], queue=watch.QUEUE)
    deadline = time.monotonic() + 60
    while not AlertDelivery.objects.filter(status="delivered").exists():
        assert hooks_worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, list(
            AlertDelivery.objects.values_list("attempt", "status", "error")
        )
        time.sleep(0.3)
    received = callback_receiver.received
    assert len(received) == 3 and len({r.body for r in received}) == 1
    assert received[1].at - received[0].at >= 0.9 and received[2].at - received[1].at >= 1.9
    assert "TLS on warm (keep-alive) connections rose by +0.40 ms" in json.loads(received[-1].body)["text"]
    rows = AlertDelivery.objects.order_by("attempt").values_list("attempt", "status", "response_status")
    assert list(rows) == [(1, "failed", 503), (2, "failed", 503), (3, "delivered", 200)]
