"""The scenario page in real Chromium: the judged runs drawn against the baseline (bands, the
regression marked), what changed, the schedule's next run; no console errors (CSP included)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.judgements import services as judgements
from portal.runs import services
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.schedules import services as schedules
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import login
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_scenario_page_draws_the_judged_series_with_the_regression_marked(
    page, live_server, django_user_model
):
    user = login(page, live_server, django_user_model)
    ago = timezone.now() - timedelta(days=3)
    runs = [
        make_run(
            user, arms={"plain": [400] * 100, "tls": [tls] * 100}, seconds=6, created=ago + timedelta(days=i)
        )
        for i, tls in enumerate((500, 510, 900))
    ]
    scenario = Scenario.objects.create(project=runs[0].project, target=runs[0].target, name="nightly")
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(scenario=scenario, scenario_version=1)
    services.pin_baseline(runs[0])
    assert [judgements.judge_run(r.pk).status for r in runs[1:]] == ["unchanged", "regression"]
    schedules.set_schedule(scenario, user, "daily at 02:00", "Europe/Berlin")
    page.goto(f"{live_server.url}/scenarios/{scenario.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-judgements') > 300", timeout=10_000)
    assert page.locator("#judgements-table tbody tr").count() == 2
    assert page.locator("#judgements-table tr[data-judgement=regression]").count() == 1
    # The costs in ms (its column says so), named in words: +0.50 ms against the baseline's +0.10.
    assert "Δ median time to last byte, ms" in page.inner_text("#judgements-table thead")
    regression = page.inner_text("#judgements-table tr[data-judgement=regression]")
    assert "TLS on warm (keep-alive) connections +0.50" in regression and "· +0.10" in regression
    assert "µs" not in page.inner_text("#judgements-table")
    assert "TLS on warm (keep-alive) connections rose by +0.40 ms" in page.inner_text("#last-judgement")
    assert "Next run at" in page.inner_text("#schedule-next")
    page.screenshot(path=str(ARTIFACTS / "scenario-watch.png"), full_page=True)
    assert page.console_errors == []
