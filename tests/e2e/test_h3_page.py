"""HTTP/3 on the run page (issue 34, item 2 and the first screen of issue 31), read in Chromium at
1280 × 900: a stored run ``tls, h2, h3, h3_new, h3_resumed, h3_0rtt`` (the project's own factories,
QUIC facts as the engine's contract has them) shows its HTTP/3 answers — value, interval, verdict and
server CPU — within the first 1,350 px, the compact QUIC table, and no sideways scroll; a run whose
0-RTT was partly refused says so on the 0-RTT row instead of a verdict."""

from __future__ import annotations

import pytest

from portal.runs import reporting
from portal.sharing import services as sharing
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import login
from tests.lib.test_http3_report import quic
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BOTTOM = "(el) => el.getBoundingClientRect().bottom + window.scrollY"
P50 = {"tls": 500, "h2": 520, "h3": 600, "h3_new": 2000, "h3_resumed": 1700, "h3_0rtt": 1200}
CPU_MS = {"tls": 0.05, "h2": 0.06, "h3": 0.09, "h3_new": 0.9, "h3_resumed": 0.5, "h3_0rtt": 0.45}
H3_ROWS = ("h3_vs_h2", "h3_vs_tls", "h3_resumption_saving", "h3_0rtt_saving")


def h3_run(user, **changes):
    facts = {name: quic(name, **changes.get(name, {})) for name in P50 if name.startswith("h3")}
    arms = {name: [p50] * 300 for name, p50 in P50.items()}
    return make_run(user, arms=arms, seconds=8, rounds=3, summarize=True, server_cpu_ms=CPU_MS, quic=facts)


def width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def check_first_screen(page) -> None:
    assert width(page) <= 1280
    for name in H3_ROWS:
        row = page.locator(f"#answer-table tr[data-answer={name}]")
        assert row.count() == 1, name
        for cell in ("td.value", "td.ci", "td.verdict-cell", "td.cpu"):
            assert row.locator(cell).evaluate(BOTTOM) <= 1350, (name, cell)
        assert " … " in row.locator("td.ci").inner_text()
        verdict = row.locator("td.verdict-cell").inner_text()
        assert any(word in verdict for word in ("negligible", "noticeable", "significant")), (name, verdict)
        assert row.locator("td.cpu").inner_text().endswith(")")  # CPU-ms with its interval
    assert page.locator("#answers").evaluate(BOTTOM) < page.locator("#quic-facts").evaluate(BOTTOM)


def test_the_http3_answers_and_quic_facts_fit_the_first_screen(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = h3_run(user)
    page.goto(f"{live_server.url}/runs/{run.code}/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(ARTIFACTS / "h3-answers.png"))
    check_first_screen(page)
    row = page.locator("#answer-table tr[data-answer=h3_0rtt_saving]")
    assert row.locator("th").inner_text() == "What 0-RTT saves on a resumed HTTP/3 connection"
    assert "saving" in row.locator("td.verdict-cell").inner_text()
    table = page.locator("#quic-table")
    zero = table.locator("tr[data-quic-arm=h3_0rtt]").inner_text()
    assert "900 / 0" in zero  # three rounds of 300 connections, merged
    assert "X25519MLKEM768" in zero and "1252" in zero and "0.10" in zero
    assert table.evaluate("t => t.closest('.table-wrap').scrollWidth <= t.closest('.table-wrap').clientWidth")
    report = reporting.export_report(run)
    assert {a["key"] for a in report["answers"]} >= set(H3_ROWS)
    assert [q["arm"] for q in report["quic"]] == ["h3", "h3_new", "h3_resumed", "h3_0rtt"]
    # The shared page and the print open with the same table and fit too.
    _, token = sharing.create_share(user, run=run)
    page.goto(f"{live_server.url}/s/{token}/")
    check_first_screen(page)
    page.emulate_media(media="print")
    assert width(page) <= 1280 and page.locator("#answer-table tr[data-answer=h3_vs_h2]").is_visible()
    assert page.console_errors == []


def test_refused_0rtt_says_so_instead_of_a_verdict(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = h3_run(user, h3_0rtt={"early_data": {"accepted": 280, "refused": 20, "no_ticket": 0}})
    page.goto(f"{live_server.url}/runs/{run.code}/")
    row = page.locator("#answer-table tr[data-answer=h3_0rtt_saving]")
    assert "not judged" in row.locator("td.verdict-cell").inner_text()
    title = row.locator("td.verdict-cell .verdict").get_attribute("title")
    assert "0-RTT not accepted on 60 of 900 connections (60 refused)" in title
    assert "840 / 60" in page.locator("#quic-table tr[data-quic-arm=h3_0rtt]").inner_text()
    check = page.locator("li[data-check=http3]")
    assert check.get_attribute("data-status") == "fail"
    assert width(page) <= 1280
