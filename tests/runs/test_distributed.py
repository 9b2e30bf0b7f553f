"""A distributed run (generators=2) through the run's task: a Locust master and two real Locust worker
processes against a real local server; the stored arm is the exact sum of the workers' parts."""

from __future__ import annotations

import pytest
from django.urls import reverse
from hdrh.histogram import HdrHistogram

from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.models import Run
from portal.runs.reporting import run_report
from portal.targets.models import Target
from tests.engine_config import engine_config
from workers import tasks

PERCENTILES = (0, 25, 50, 90, 99, 99.9, 100)


def _added(encoded: list[str]) -> HdrHistogram:
    total = HdrHistogram(1, 60_000_000, 3)
    for text in encoded:
        total.decode_and_add(text)
    return total


@pytest.mark.django_db(transaction=True)
def test_two_locust_workers_merge_exactly_into_the_stored_arm(client, owner, plain_server, settings):
    settings.TOLLGATE_GENERATOR_HOSTS = ""  # this host's processes only, whatever else listens on the broker
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="local")
    url = plain_server.url()
    config = engine_config(
        {"plain": url, "plain_new": url},
        users=4,
        spawn_rate=100,
        warmup_s=0.5,
        duration_s=1.5,
        generators=2,
        arrival_rate=200,  # open loop, split across the generators: samples, not a core burnt flat out
    )
    run = services.create_run(owner, target, config)
    assert tasks.run_benchmark(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    arms = {arm.arm: arm for arm in run.arms.all()}
    assert set(arms) == {"plain", "plain_new"}
    for name, arm in arms.items():
        workers = arm.generators
        assert len(workers) == 2 and len({w["id"] for w in workers}) == 2
        assert all(w["lost_at"] is None and w["requests"] > 0 and w["cpu_s"] > 0 for w in workers), workers
        assert arm.complete and arm.requests == sum(w["requests"] for w in workers)
        assert arm.failures == sum(w["failures"] for w in workers) == 0
        metrics = [("ttlb_us", arm.ttlb_hist), ("ttfb_us", arm.ttfb_hist)]
        if name == "plain_new":
            metrics.append(("connect_us", arm.connect_hist))
            assert arm.connections_opened == arm.requests
        for metric, stored in metrics:
            merged = HdrHistogram.decode(stored)
            added = _added([w["hist"][metric] for w in workers])
            assert merged.get_total_count() == added.get_total_count() == arm.requests
            for p in PERCENTILES:
                assert merged.get_value_at_percentile(p) == added.get_value_at_percentile(p), (metric, p)
            assert merged.get_mean_value() == added.get_mean_value()
        assert arm.status_codes == {"200": arm.requests}
    report = run_report(run)
    entries = report["generators"]
    assert len(entries) == 2
    for name in arms:
        assert sum(e["arms"][name]["requests"] for e in entries) == report["arms"][name]["requests"]
        assert all(e["arms"][name]["cpu_s"] > 0 for e in entries)
    assert all(e["lost_at"] is None and e["host"] for e in entries)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="generators-table"' in page and all(f"<code>{e['id']}</code>" in page for e in entries)
    assert "A generator was lost" not in page
