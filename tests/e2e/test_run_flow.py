"""A person's path in real Chromium: log in → fill the form → watch progress → read the report."""

from __future__ import annotations

import re

import pytest

from portal.runs.models import Run
from tests.e2e.conftest import ARTIFACTS

pytestmark = pytest.mark.e2e

CANVAS_INK = """(id) => {
  const canvas = document.getElementById(id);
  if (!canvas || !window.Chart || !Chart.getChart(canvas)) return -1;
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let inked = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) inked++;
  return inked;
}"""


def test_form_to_report_with_a_drawn_chart(
    page, live_server, celery_worker, django_user_model, plain_server, tls_server
):
    django_user_model.objects.create_user("alice", password="alice-pass-123")
    page.goto(f"{live_server.url}/runs/new/")
    assert "/accounts/login/" in page.url
    page.fill("#id_login", "alice")
    page.fill("#id_password", "alice-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/new/$"))

    # A bad URL first: the form shows the field error and keeps the input.
    page.fill("#id_plain_url", "https://127.0.0.1/")
    page.fill("#id_tls_url", tls_server.url())
    page.click("text=Start run")
    assert "Needs an http:// URL" in page.inner_text("#field-plain_url")
    assert page.input_value("#id_tls_url") == tls_server.url()

    page.fill("#id_plain_url", plain_server.url())
    page.fill("#id_users", "2")
    page.fill("#id_spawn_rate", "20")
    page.fill("#id_warmup_s", "1")
    page.fill("#id_duration_s", "2")
    page.uncheck("#id_verify_tls")
    page.check("input[name=arms][value=plain_new]")  # the control arm for tls_new
    page.click("text=Start run")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    # Live progress: the page polls and shows the worker measuring an arm.
    page.wait_for_function(
        "() => (document.getElementById('run-phase') || {textContent: ''}).textContent.length > 0",
        timeout=60_000,
    )
    page.screenshot(path=str(ARTIFACTS / "run-progress.png"))
    # When the run ends the page reloads into the report.
    page.wait_for_selector("#arm-table", timeout=90_000)
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED, run.error
    rows = page.locator("#arm-table tbody tr")
    assert rows.count() == 4
    assert [rows.nth(i).get_attribute("data-arm") for i in range(4)] == [
        "plain",
        "tls",
        "plain_new",
        "tls_new",
    ]
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-ttlb') > 500", timeout=10_000)
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-gen') > 500", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "run-report.png"), full_page=True)
    # The answers first, with their verdicts: keep-alive TLS and the handshake (tls_new − plain_new).
    answers = page.inner_text("#answer-table")
    assert (
        "TLS on warm (keep-alive) connections" in answers and "The full TLS handshake per request" in answers
    )
    assert page.locator("#answer-table tr[data-answer=handshake] .verdict").count() == 1
    # The validity panel: every check with its status; this healthy local run fails none.
    statuses = page.eval_on_selector_all("#validity [data-check]", "els => els.map(e => e.dataset.status)")
    checks = page.eval_on_selector_all("#validity [data-check]", "els => els.map(e => e.dataset.check)")
    assert {"status_codes", "content_length", "generator_saturation", "sample_size", "syn_retransmit"} <= set(
        checks
    )
    assert "fail" not in [s for c, s in zip(checks, statuses, strict=True) if c != "sample_size"]
    # TLS facts from a real handshake with the test server.
    assert "TLSv1.3" in page.inner_text("#tls-info")
    assert page.console_errors == []
