"""The Content-Security-Policy holds on every main page in Chromium: nothing blocked, no unsafe-inline."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.runs.models import Run
from portal.scenarios.models import Scenario
from tests.e2e.test_report_pages import ARMS, login
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Devtools injects this before the page's own scripts; CSP does not apply to it.
WATCH = """document.addEventListener('securitypolicyviolation', function (e) {
  (window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI);
});"""


def test_no_page_breaks_the_policy(page, live_server, django_user_model):
    violations: list[str] = []
    page.on("console", lambda msg: "Content Security Policy" in msg.text and violations.append(msg.text))
    page.add_init_script(WATCH)
    user = login(page, live_server, django_user_model)
    user.is_staff = True
    user.save()
    runs = [make_run(user, arms=ARMS, seconds=8, summarize=True) for _ in range(2)]
    # The run page with its budget table; the scenario pages.
    scenario = Scenario.objects.create(
        project=runs[0].project, target=runs[0].target, name="csp", budgets={"failed_checks": 0}
    )
    budgets = {"keepalive_tls_p50_ms": 1, "failed_checks": 0}
    Run.objects.filter(pk=runs[0].pk).update(
        scenario=scenario,
        scenario_version=1,
        config={**runs[0].config, "budgets": budgets},
        finished=timezone.now(),  # its report is computed afresh, with the budgets
    )
    paths = [
        f"/runs/{runs[0].code}/",
        "/runs/",
        f"/runs/compare/?runs={runs[0].code},{runs[1].code}",
        "/runs/new/",
        f"/runs/trend/{runs[0].target.code}/",
        "/targets/",
        f"/targets/{runs[0].target.code}/ssh/",
        "/scenarios/",
        f"/scenarios/{scenario.code}/",
        f"/scenarios/{scenario.code}/edit/",
        "/audit/",
        "/accounts/password/change/",
        "/accounts/email/",
        "/accounts/2fa/",
    ]
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        policy = response.headers["content-security-policy"]
        assert "unsafe-inline" not in policy and "script-src 'self'" in policy, path
        page.wait_for_load_state("networkidle")
        seen = page.evaluate("window.__csp || []")
        assert seen == [], (path, seen)
    # The run page drew its charts: scripts from 'self' ran.
    page.goto(f"{live_server.url}/runs/{runs[0].code}/")
    page.wait_for_selector("#chart-ttlb")
    assert page.locator("#budget-table tbody tr").count() == 2
    page.click("button.link")  # log out
    page.wait_for_load_state()
    for path in ("/accounts/login/", "/accounts/signup/", "/accounts/password/reset/"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert page.evaluate("window.__csp || []") == [], path
    assert violations == []
    assert page.console_errors == []
