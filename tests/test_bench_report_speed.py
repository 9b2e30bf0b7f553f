"""bench/report_speed runs end to end in its quick mode on the test database: it seeds its runs,
asks for each page, prints its figures as the last line and removes what it seeded."""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model

from portal.runs.models import Run
from tests.conftest import bench_report, database_url_for_children

TIMES_MS = (
    "report_ms",
    "report_cached_ms",
    "report_compute_ms",
    "compare5_ms",
    "compare5_compute_ms",
    "list_ms",
)


def test_bench_report_speed_quick_run_prints_the_figures_and_cleans_up(transactional_db, monkeypatch):
    monkeypatch.setitem(os.environ, "DATABASE_URL", database_url_for_children())
    report = bench_report("report_speed", "--quick", timeout=180)
    assert report["benchmark"] == "tollgate-report-speed" and report["quick"] is True
    assert report["database"] == "postgresql" and report["runs_seeded"] == 6 and report["repeat"] == 1
    assert report["requests_in_big_run"] == report["arms"] * report["rounds"] * 500_000
    for key in TIMES_MS:
        assert report[key] > 0, key
    assert report["bytes_per_arm"] > 0 and report["stored_report_bytes"] > 0
    assert set(report["met"]) == {"report_ms", "compare5_ms", "bytes_per_arm"}
    # Its user, and with it the personal project's target and runs, are gone again.
    assert not get_user_model().objects.filter(username="bench-report-speed").exists()
    assert not Run.objects.exists()
