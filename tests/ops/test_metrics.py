"""/metrics: Prometheus's text format, read back by prometheus_client's own parser, answered only to
the networks of TOLLGATE_METRICS_NETWORKS."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.hooks.models import CallbackDelivery, WebhookDelivery, WebhookTrigger
from portal.runs.models import ArmResult, Run, RunAttempt
from portal.scenarios.models import Scenario
from tests.ops.conftest import seen
from tests.runs.factories import make_run
from tests.test_settings import clean_env, load_settings, refused

pytestmark = pytest.mark.django_db


def scrape(client, **extra) -> dict:
    """name → {labels tuple → value} of every sample, through the official parser."""
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=")
    out: dict = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_no_networks_no_metrics(client, settings):
    settings.TOLLGATE_METRICS_NETWORKS = []
    assert client.get("/metrics").status_code == 404


def test_a_client_outside_the_networks_is_refused(client, settings):
    settings.TOLLGATE_METRICS_NETWORKS = ["10.0.0.0/8", "fd00::/8"]
    assert client.get("/metrics").status_code == 403  # the test client is 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="fd00::5").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200


def test_forwarded_for_counts_only_behind_trusted_proxies(client, settings):
    settings.TOLLGATE_METRICS_NETWORKS = ["10.0.0.0/8"]
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 0
    forged = {"REMOTE_ADDR": "192.0.2.7", "HTTP_X_FORWARDED_FOR": "10.1.2.3"}
    assert client.get("/metrics", **forged).status_code == 403
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1
    proxied = {"REMOTE_ADDR": "192.0.2.7", "HTTP_X_FORWARDED_FOR": "10.1.2.3"}
    assert client.get("/metrics", **proxied).status_code == 200
    outside = {"REMOTE_ADDR": "10.9.9.9", "HTTP_X_FORWARDED_FOR": "192.0.2.8"}
    assert client.get("/metrics", **outside).status_code == 403


def _stored_world(owner) -> None:
    now = timezone.now()
    done = make_run(owner, arms={"plain": [400] * 20, "tls_new": [3000] * 20})
    Run.objects.filter(pk=done.pk).update(
        created=now - timedelta(seconds=40), started=now - timedelta(seconds=30)
    )
    ArmResult.objects.filter(run=done, arm="plain").update(
        started=now - timedelta(seconds=25), finished=now - timedelta(seconds=17)
    )
    ArmResult.objects.filter(run=done, arm="tls_new").update(
        started=now - timedelta(seconds=16), finished=now - timedelta(seconds=2)
    )
    failed = make_run(owner, status=Run.Status.FAILED, arms={})
    Run.objects.filter(pk=failed.pk).update(
        started=now - timedelta(seconds=200), created=now - timedelta(seconds=210)
    )
    running = make_run(owner, status=Run.Status.RUNNING, arms={})
    Run.objects.filter(pk=running.pk).update(finished=None)
    RunAttempt.objects.create(
        run=running, number=1, worker="celery@gen1 pid 3", host="gen1", claimed=now, heartbeat=now
    )
    queued = make_run(owner, status=Run.Status.QUEUED, arms={})
    Run.objects.filter(pk=queued.pk).update(created=now - timedelta(seconds=95), started=None, finished=None)
    trigger = WebhookTrigger.objects.create(
        scenario=Scenario.objects.create(project=done.project, name="s", target=done.target),
        secret_enc="sealed",
        created_by=owner,
    )
    for code in (202, 202, 200, 401, 429):
        WebhookDelivery.objects.create(trigger=trigger, status_code=code, outcome="x")
    for attempt, status in enumerate(("failed", "failed", "delivered"), start=1):
        CallbackDelivery.objects.create(run=done, url="https://127.0.0.1/cb", attempt=attempt, status=status)
    seen("celery@gen1", "gen1", ["runs"])
    seen("gen@gen2", "gen2", ["gen.gen2"], ago_s=5)
    seen("gen@gen3", "gen3", ["gen.gen3"], ago_s=600)  # silent
    seen("maintenance@m", "m", ["maintenance", "celery"])  # not a generator


def test_metrics_scraped_and_parsed(client, settings, owner):
    settings.TOLLGATE_METRICS_NETWORKS = ["127.0.0.0/8"]
    _stored_world(owner)
    m = scrape(client)
    assert m["tollgate_runs"] == {
        (("status", s),): float(n)
        for s, n in {
            "queued": 1,
            "running": 1,
            "succeeded": 1,
            "failed": 1,
            "cancelled": 0,
            "incomplete": 0,
        }.items()
    }
    assert m["tollgate_run_queue_depth"][()] == 1
    assert 94 <= m["tollgate_run_queue_oldest_wait_seconds"][()] < 200
    assert m["tollgate_run_attempts_open"] == {(("host", "gen1"),): 1.0}
    # Queue wait (created → started): 10 s for the ended runs, ~0 for the running one; the queued
    # one has not started.
    wait = m["tollgate_run_queue_wait_seconds_bucket"]
    assert wait[(("le", "5.0"),)] == 1 and wait[(("le", "15.0"),)] == 3 and wait[(("le", "+Inf"),)] == 3
    # Run durations by status: the succeeded run took 30 s, the failed one 200 s.
    assert m["tollgate_run_duration_seconds_count"][(("status", "succeeded"),)] == 1
    assert m["tollgate_run_duration_seconds_sum"][(("status", "succeeded"),)] == pytest.approx(30, abs=1)
    runs = m["tollgate_run_duration_seconds_bucket"]
    assert runs[(("le", "10.0"), ("status", "succeeded"))] == 0
    assert runs[(("le", "60.0"), ("status", "succeeded"))] == 1
    assert (
        runs[(("le", "120.0"), ("status", "failed"))] == 0
        and runs[(("le", "300.0"), ("status", "failed"))] == 1
    )
    arms = m["tollgate_arm_duration_seconds_bucket"]
    assert arms[(("le", "5.0"),)] == 0 and arms[(("le", "10.0"),)] == 1 and arms[(("le", "30.0"),)] == 2
    assert m["tollgate_arm_duration_seconds_sum"][()] == pytest.approx(22, abs=0.1)
    hooks = m["tollgate_webhook_deliveries"]
    assert hooks[(("code", "202"), ("outcome", "started"))] == 2
    assert hooks[(("code", "200"), ("outcome", "repeat"))] == 1
    assert hooks[(("code", "401"), ("outcome", "refused"))] == 1
    assert m["tollgate_callback_deliveries"] == {
        (("outcome", "pending"),): 0.0,
        (("outcome", "delivered"),): 1.0,
        (("outcome", "failed"),): 2.0,
    }
    assert m["tollgate_generator_hosts_alive"][()] == 2  # gen1 (runs) and gen2 (gen.*): gen3 is silent
    assert m["tollgate_workers_alive"][(("queue", "runs"),)] == 1


def test_metrics_of_an_empty_portal_parse_too(client, settings, django_assert_max_num_queries):
    settings.TOLLGATE_METRICS_NETWORKS = ["127.0.0.0/8"]
    with django_assert_max_num_queries(13):  # one run-duration histogram per terminal status (4)
        m = scrape(client)
    assert m["tollgate_run_queue_depth"][()] == 0
    assert m["tollgate_run_duration_seconds_count"][(("status", "succeeded"),)] == 0
    assert m["tollgate_generator_hosts_alive"][()] == 0


def test_a_bad_metrics_network_stops_the_start(tmp_path):
    env = clean_env(tmp_path, TOLLGATE_DEMO="1", TOLLGATE_METRICS_NETWORKS="10.0.0.1/8")
    message = refused(load_settings(env))
    assert message.startswith("django.core.exceptions.ImproperlyConfigured: TOLLGATE_METRICS_NETWORKS: ")
