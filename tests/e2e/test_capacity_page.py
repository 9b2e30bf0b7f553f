"""The run page's capacity section in real Chromium: the chart drawn (under the CSP: no inline
script), the points table and the capacity cost of TLS in words."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import ARMS, login
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SETTINGS = {"arms": ["plain", "tls_new"], "mode": "users", "start": 1, "max": 64, "factor": 2.0, "zoom": 3}


def stage(users: int, rps: float, p50_us: int, new: bool) -> dict:
    return {
        "load": users, "phase": "coarse", "users": users, "rate": None, "requests": int(rps * 2),
        "failures": 0, "error_rate": 0.0, "measured_s": 2.0, "rps": rps,
        "new_connections_per_s": rps if new else 0.0, "ttlb_p50_us": p50_us, "ttlb_p99_us": p50_us * 2,
        "gen_cpu_pct": 30.0, "gen_runq_pct": 2.0, "loop_lag_ms": 0.4, "gen_cpu_us_per_request": 30.0,
        "complete": True,
    }  # fmt: skip


def curve(cap: float, per_user: float, new: bool) -> list[dict]:
    return [
        stage(u, min(cap, per_user * u), int(1e6 * u / min(cap, per_user * u)), new) for u in (1, 2, 4, 8, 16)
    ]


def test_capacity_chart_renders_with_the_table_and_the_words(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = make_run(user, arms=ARMS, seconds=4)
    run.capacity = {
        "settings": SETTINGS,
        "arms": {"plain": curve(18000.0, 3000.0, False), "tls_new": curve(1800.0, 600.0, True)},
    }
    run.save(update_fields=["capacity"])
    page.goto(f"{live_server.url}/runs/{run.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-capacity') > 300", timeout=10_000)
    words = page.inner_text("#capacity-cost")
    assert (
        "Handshakes cap this server at 1,800 new TLS connections/s against 18,000 plain requests/s" in words
    )
    assert page.locator("#capacity-points tbody tr").count() == 10
    assert "server" in page.inner_text("#capacity-summary")
    page.locator("#capacity").screenshot(path=str(ARTIFACTS / "report-capacity.png"))
    assert page.console_errors == []
