"""The evidence on the pages: the run form's short-run note, the status badge on the run page, the
list and the compare page, skipped checks apart from passes, costs without a verdict."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.runs.models import ArmResult
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

FORM = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["plain", "tls", "tls_new"],
    "users": "0",  # invalid on purpose: the form comes back with what was typed
    "spawn_rate": "2",
    "warmup_s": "1",
}


def ci_note(body: str) -> str:
    start = body.index('id="ci-note"')
    return body[start : body.index(">", start)]


def test_the_form_says_before_submitting_when_a_run_is_too_short_for_intervals(client, owner):
    client.force_login(owner)
    url = reverse("runs-new")
    fresh = client.get(url).content.decode()
    assert "hidden" in ci_note(fresh)  # 10 s by default: intervals over seconds
    assert "js/run_form.js" in fresh and "Too short for confidence intervals" in fresh
    short = client.post(url, {**FORM, "duration_s": "2"}).content.decode()
    assert "hidden" not in ci_note(short)
    with_rounds = client.post(url, {**FORM, "duration_s": "2", "rounds": "3"}).content.decode()
    assert "hidden" in ci_note(with_rounds)
    two_rounds = client.post(url, {**FORM, "duration_s": "3", "rounds": "2"}).content.decode()
    assert "hidden" in ci_note(two_rounds)  # 2 × 3 seconds: six per-second points


def test_detail_badge_greys_skipped_checks_and_marks_costs_not_judged(client, owner):
    run = make_run(owner)  # its report is computed (and stored) on the first read below
    ArmResult.objects.filter(run=run, arm="tls").update(status_codes={"503": 100})
    client.force_login(owner)
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="run-checks"' in body and "badge bad" in body
    assert 'data-invalid-arm="tls"' in body and "100% of 100 attempts failed (status 503×100)" in body
    assert 'class="check check-skip" data-check="drift" data-status="skip"' in body
    assert 'data-answer="keepalive_tls"' in body and "not judged" in body
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    keepalive = next(c for c in report["costs"] if c["name"] == "keepalive_tls")
    assert keepalive["verdict"] is None and keepalive["not_judged"].startswith("tls is invalid: 100% of 100")


def test_list_and_compare_show_the_same_badge(client, owner):
    clean = make_run(owner, summarize=True, arms={"plain": [400] * 1000, "tls": [500] * 1000})
    broken = make_run(owner, arms={"plain": [400] * 1000, "tls": [500] * 1000})
    ArmResult.objects.filter(run=broken, arm="tls").update(status_codes={"200": 500, "404": 500})
    from portal.runs.reporting import store_summary

    store_summary(broken)
    client.force_login(owner)
    listed = client.get(reverse("runs-list")).content.decode()
    assert listed.count('data-checks="bad"') == 1 and "with 2 failed checks" in listed
    assert 'data-checks="ok"' in listed  # the clean run: every check that judged held
    compared = client.get(reverse("runs-compare"), {"runs": f"{clean.code},{broken.code}"}).content.decode()
    assert compared.count('data-checks="bad"') == 1 and "with 2 failed checks" in compared
    assert "not judged" in compared
    data = client.get(
        reverse("runs-compare"), {"runs": f"{clean.code},{broken.code}", "format": "json"}
    ).json()
    assert data["runs"][1]["checks"]["fail"] == 2
    keepalive = next(row for row in data["costs"] if row["name"] == "keepalive_tls")
    assert keepalive["cells"][1]["change"]["significance"] == "unknown"  # no verdict, no comparison


def _closing_server_run(owner, reopened: int):
    """A run whose tls arm (1,000 requests) reopened that many connections the server had closed."""
    run = make_run(owner, arms={"plain": [400] * 1000, "tls": [500] * 1000}, seconds=8)
    ArmResult.objects.filter(run=run, arm="tls").update(
        connections_opened=reopened, connections_reopened=reopened
    )
    return run


def test_a_keepalive_arm_whose_server_closed_connections_is_shown_and_its_cost_marked(client, owner):
    client.force_login(owner)
    # The server ended tls's connections every 100 requests: a warning, beside the cost's verdict.
    run = _closing_server_run(owner, 10)
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'data-reopened="10"' in body and "(10 reopened: the server closed them)" in body
    assert 'data-check="keepalive" data-status="warn"' in body and "warned" in body
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    keepalive = next(c for c in report["costs"] if c["name"] == "keepalive_tls")
    assert keepalive["verdict"] is not None and "keepalive" in [w["check"] for w in keepalive["warnings"]]
    # Every fifth request: the cost is not judged, and says why.
    run = _closing_server_run(owner, 200)
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'data-check="keepalive" data-status="fail"' in body
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    keepalive = next(c for c in report["costs"] if c["name"] == "keepalive_tls")
    assert keepalive["verdict"] is None
    assert keepalive["not_judged"].startswith("tls: the server closed its connections, 200 reopened")
    assert (
        "20.0% of requests paid a new connection and a TLS handshake (keepalive)" in keepalive["not_judged"]
    )


def test_the_checks_evidence_follows_the_results_per_arm_one_line_each(client, owner):
    """The validity checks say what they found; the JSON they were judged on comes after the results
    per arm, collapsed to one line per check that opens to the whole of it."""
    run = make_run(owner)
    ArmResult.objects.filter(run=run, arm="tls").update(status_codes={"200": 90, "503": 10})
    client.force_login(owner)
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    assert body.index('id="validity"') < body.index('id="report"') < body.index('id="evidence"')
    assert body.index('id="evidence"') < body.index('id="charts"')
    validity = body[body.index('id="validity"') : body.index('id="report"')]
    assert "<pre>" not in validity and 'href="#evidence-status_codes"' in validity
    evidenced = [check for check in report["validity"] if check.get("evidence")]
    section = body[body.index('id="evidence"') : body.index('id="charts"')]
    assert section.count("<details") == len(evidenced) >= 3 and "<details open" not in section
    block = section[section.index('id="evidence-status_codes"') :]
    block = block[: block.index("</details>")]
    assert "<strong>status_codes</strong>: tls · " in block and " lines of JSON</summary>" in block
    assert "&quot;503&quot;: 10" in block  # the full JSON, a click away
