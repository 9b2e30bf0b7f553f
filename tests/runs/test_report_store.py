"""A finished run's report is computed once, stored, and served from the store; a new report
version (or finish time) makes the stored page stale and it is rebuilt."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from portal.runs import reporting
from portal.runs.models import Run, RunReport
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def test_stored_report_is_served_and_rebuilt_when_stale(owner, monkeypatch):
    run = make_run(owner, seconds=6)
    key = reporting.cache_key(run)
    page = reporting.materialize(run)
    stored = RunReport.objects.get(run=run)
    assert stored.key == key and stored.computed_ms > 0
    assert stored.page["report"]["arms"]["tls"]["requests"] == page["report"]["arms"]["tls"]["requests"]
    # With the cache gone, the page comes from the store, not from the histograms.
    cache.delete(key)
    calls = []
    monkeypatch.setattr(reporting, "_build_page", lambda *a, **k: calls.append(1) or page)
    served = reporting.report_page(run)
    assert calls == [] and served["report"]["headline"] == page["report"]["headline"]
    # A new version of the report math: the stored page no longer matches and is rebuilt once.
    monkeypatch.setattr(reporting, "REPORT_CACHE_VERSION", "test-next")
    reporting.report_page(run)
    assert calls == [1]
    assert RunReport.objects.get(run=run).key == reporting.cache_key(run) != key


def test_running_runs_are_never_stored(owner):
    run = make_run(owner, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(finished=None)
    run.refresh_from_db()
    reporting.report_page(run)
    assert not RunReport.objects.filter(run=run).exists()
