"""A real run in Chromium: live charts with points before the run ends, then a confirmed cancel
that leaves the measured arm labelled cut short."""

from __future__ import annotations

import re

import pytest

from portal.runs.models import Run
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import login
from tests.e2e.test_run_flow import CANVAS_INK

pytestmark = [pytest.mark.e2e]

LIVE_POINTS = """(arm) => {
  const canvas = document.getElementById('chart-live-rps');
  const chart = canvas && window.Chart && Chart.getChart(canvas);
  if (!chart) return 0;
  const set = chart.data.datasets.find(d => d.label === arm);
  return set ? set.data.filter(v => v !== null && v !== undefined).length : 0;
}"""


def test_live_charts_draw_the_current_arm_beside_the_earlier_ones_then_cancel(
    page, live_server, celery_worker, django_user_model, plain_server, tls_server
):
    login(page, live_server, django_user_model)
    page.goto(f"{live_server.url}/runs/new/")
    page.fill("#id_plain_url", plain_server.url())
    page.fill("#id_tls_url", tls_server.url())
    page.fill("#id_users", "2")
    page.fill("#id_spawn_rate", "20")
    page.fill("#id_warmup_s", "1")
    page.fill("#id_duration_s", "8")
    page.uncheck("#id_verify_tls")
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    run_url = page.url

    # While the second arm is measured: its seconds so far beside the first arm's, drawn and tabled.
    page.wait_for_function(f"() => ({LIVE_POINTS})('tls') >= 2", timeout=90_000)
    assert page.inner_text("#run-status") == "running"
    assert Run.objects.get().status == Run.Status.RUNNING  # points came before the run finished
    assert page.evaluate(f"({LIVE_POINTS})('plain')") >= 7
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-live-rps') > 300", timeout=5_000)
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-live-latency') > 300", timeout=5_000)
    assert page.get_attribute("#live-table tr[data-arm=plain]", "data-state") == "measured"
    assert page.get_attribute("#live-table tr[data-arm=tls]", "data-state") == "measuring"
    for canvas in ("chart-live-rps", "chart-live-latency"):
        assert page.get_attribute(f"#{canvas}", "role") == "img"
        assert page.get_attribute(f"#{canvas}", "aria-label")
    page.locator("#live").screenshot(path=str(ARTIFACTS / "run-live.png"))

    # Cancel asks first (a page, no script needed); confirmed, the measured arm is kept cut short.
    page.click("#cancel-link")
    page.wait_for_selector("#confirm-cancel")
    page.screenshot(path=str(ARTIFACTS / "run-cancel-confirm.png"))
    page.click("#confirm-cancel")
    page.wait_for_url(run_url)
    page.wait_for_selector("#arm-table", timeout=60_000)
    page.wait_for_function(
        "() => document.getElementById('run-status').textContent === 'cancelled'", timeout=60_000
    )
    run = Run.objects.get()
    assert run.status == Run.Status.CANCELLED
    assert "cut short (tls)" in run.error and "finished" in run.error  # plain finished, tls cut short
    assert "cut short" in page.inner_text("#arm-table tr[data-arm=tls]")
    assert "cut short" not in page.inner_text("#arm-table tr[data-arm=plain]")
    assert "Pin as baseline" not in page.inner_text("#progress")
    assert page.console_errors == []
