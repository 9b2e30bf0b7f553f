"""The run form warns, while the user types, that a run is too short for confidence intervals."""

from __future__ import annotations

import pytest

from tests.e2e.test_report_pages import login

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_short_run_note_follows_duration_and_rounds(page, live_server, django_user_model):
    login(page, live_server, django_user_model)
    page.goto(f"{live_server.url}/runs/new/")
    note = page.locator("#ci-note")
    assert not note.is_visible()  # 10 s per arm by default
    page.fill("#id_duration_s", "3")
    assert note.is_visible() and "Too short for confidence intervals" in note.inner_text()
    page.click("summary:has-text('Scenario options')")
    page.fill("#id_rounds", "3")
    assert not note.is_visible()  # three rounds give intervals over rounds
    page.fill("#id_rounds", "1")
    page.fill("#id_duration_s", "5")
    assert not note.is_visible()  # five seconds give intervals over seconds
    assert page.console_errors == []
