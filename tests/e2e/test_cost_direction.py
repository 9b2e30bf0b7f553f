"""The first screen in real Chromium when TLS measured faster than plain: the answer says "check the
setup", and the badge is not the red of a significant cost (screenshot in tests/artifacts)."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import login
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# tls 0.84 ms (26%) faster than plain, a full handshake 2.8 ms slower than plain_new.
ARMS = {
    "plain": [3200 + i % 40 for i in range(600)],
    "tls": [2360 + i % 40 for i in range(600)],
    "plain_new": [3200 + i % 40 for i in range(600)],
    "tls_new": [6000 + i % 40 for i in range(600)],
    "tls_resumed": [4000 + i % 40 for i in range(600)],
}
RED = "rgb(161, 18, 31)"  # .verdict-significant


def badge(page, cost: str) -> dict:
    return page.eval_on_selector(
        f"#answer-table [data-answer={cost}] .verdict",
        "e => ({text: e.innerText, colour: getComputedStyle(e).color, direction: e.dataset.direction})",
    )


def test_tls_faster_than_plain_reads_as_check_the_setup(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = make_run(user, arms=ARMS, seconds=8, summarize=True)
    page.goto(f"{live_server.url}/runs/{run.code}/")
    answer = page.inner_text("#headline")
    assert (
        "tls answered 0.84 ms faster than plain at the median time to last byte — check the setup" in answer
    )
    assert "session resumption saves 2.00 ms per new connection (significant saving" in answer
    keepalive = badge(page, "keepalive_tls")
    assert keepalive == {
        "text": "tls faster than plain — check the setup",
        "colour": "rgb(110, 58, 140)",
        "direction": "saving",
    }
    # A real cost keeps its red; what resumption saves is a saving, not red.
    assert badge(page, "handshake") == {"text": "significant", "colour": RED, "direction": "cost"}
    saving = badge(page, "resumption_saving")
    assert saving["text"] == "significant saving" and saving["colour"] != RED
    page.locator("#answers").screenshot(path=str(ARTIFACTS / "report-cost-direction.png"))
    assert page.console_errors == []
