"""Report exports, baseline, runs list filters, compare and trend pages (real PostgreSQL)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.runs.models import Run
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def test_csv_has_one_row_per_arm_and_metric(client, owner):
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100})
    client.force_login(owner)
    response = client.get(reverse("runs-report-csv", args=[run.code]))
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    by_key = {(r["arm"], r["metric"], r["statistic"]): r for r in rows}
    assert by_key[("plain", "ttlb_us", "p50")]["value"] == "400"
    assert (
        by_key[("plain", "ttlb_us", "p50")]["unit"] == "us"
        and by_key[("plain", "ttlb_us", "p50")]["samples"] == "100"
    )
    assert by_key[("tls", "ttfb_us", "p50")]["value"] == "250"
    assert by_key[("tls", "rps", "mean")]["value"] == "10.0"
    assert by_key[("tls-plain", "cost:keepalive_tls:ttlb_p50_us", "delta")]["value"] == "100"
    assert by_key[("tls-plain", "cost:keepalive_tls:ttlb_p50_us", "delta_pct")]["value"] == "25.0"
    # Every row is arm × metric × statistic: no duplicates.
    assert len(by_key) == len(rows)
    assert ("plain", "server_cpu", "per_request") not in by_key  # not probed


def test_csv_carries_server_cpu_when_probed(client, owner):
    run = make_run(
        owner, arms={"plain": [400] * 100, "tls": [500] * 100}, server_cpu_ms={"plain": 0.02, "tls": 0.05}
    )
    client.force_login(owner)
    rows = list(
        csv.DictReader(io.StringIO(client.get(reverse("runs-report-csv", args=[run.code])).content.decode()))
    )
    by_key = {(r["arm"], r["metric"], r["statistic"]): r for r in rows}
    assert by_key[("tls", "server_cpu", "per_request")]["value"] == "0.05"
    assert by_key[("tls", "server_cpu", "per_request")]["unit"] == "ms"
    delta = by_key[("tls-plain", "cost:keepalive_tls:server_cpu_ms_per_req", "delta")]
    assert float(delta["value"]) == 0.03 and delta["unit"] == "ms"


def test_pin_and_unpin_a_baseline(client, owner, outsider):
    run = make_run(owner)
    client.force_login(outsider)
    assert client.post(reverse("runs-pin-baseline", args=[run.code])).status_code == 404
    client.force_login(owner)
    client.post(reverse("runs-pin-baseline", args=[run.code]))
    run.target.refresh_from_db()
    assert run.target.baseline_id == run.pk
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert "baseline of t" in body
    other = make_run(owner)
    body = client.get(reverse("runs-detail", args=[other.code])).content.decode()
    assert f"?runs={run.code},{other.code}" in body  # compare with the baseline
    client.post(reverse("runs-pin-baseline", args=[run.code]), {"unpin": "1"})
    run.target.refresh_from_db()
    assert run.target.baseline_id is None
    # Unpin from a stale page (the run is no baseline any more) never pins it.
    client.post(reverse("runs-pin-baseline", args=[run.code]), {"unpin": "1"})
    run.target.refresh_from_db()
    assert run.target.baseline_id is None


def test_list_filters_sorts_and_shows_the_headline_cost(client, owner):
    day = timezone.now() - timedelta(days=3)
    old = make_run(owner, target_name="alpha", summarize=True, created=day)
    new = make_run(owner, target_name="beta", summarize=True)
    failed = make_run(owner, target_name="beta", status=Run.Status.FAILED)
    client.force_login(owner)
    url = reverse("runs-list")
    body = client.get(url).content.decode()
    # Newest first; the keep-alive TLS cost of each succeeded run: 500 − 400 µs = +0.10 ms (+25.0%),
    # the new-connection cost (tls_new − plain) in its own column, and without plain_new no handshake.
    assert body.index(str(failed.code)) < body.index(str(new.code)) < body.index(str(old.code))
    assert "+0.10 ms (+25.0%)" in body and '<td class="cost" data-cost="new_connection_tls">+2.60 ms' in body
    assert '<td class="cost" data-cost="handshake">—' in body
    only_beta = client.get(url, {"target": str(new.target.code)}).content.decode()
    assert str(new.code) in only_beta and str(old.code) not in only_beta
    only_failed = client.get(url, {"status": "failed"}).content.decode()
    assert str(failed.code) in only_failed and str(new.code) not in only_failed
    since = client.get(
        url, {"since": (timezone.now() - timedelta(days=1)).date().isoformat()}
    ).content.decode()
    assert str(old.code) not in since and str(new.code) in since
    oldest_first = client.get(url, {"sort": "created"}).content.decode()
    assert oldest_first.index(str(old.code)) < oldest_first.index(str(new.code))
    bad = client.get(url, {"since": "yesterday"})
    assert bad.status_code == 200 and "is not a date" in bad.content.decode()


def test_compare_lists_setup_differences_first_and_judges_changes(client, owner):
    a = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100}, seconds=6)
    b = make_run(owner, arms={"plain": [400] * 100, "tls": [900] * 100}, seconds=6)
    Run.objects.filter(pk=b.pk).update(config={**b.config, "users": 8})
    client.force_login(owner)
    url = reverse("runs-compare")
    # The list's checkboxes send runs=a&runs=b: redirected to the canonical, bookmarkable form.
    response = client.get(url, {"runs": [str(a.code), str(b.code)]})
    assert response.status_code == 302 and response["Location"].endswith(f"?runs={a.code},{b.code}")
    data = client.get(url, {"runs": f"{a.code},{b.code}", "format": "json"}).json()
    differing = {d["key"]: d["values"] for d in data["setup_differences"]}
    assert differing["users"] == [2, 8]
    assert "config_hash" in differing and "target" not in differing
    keepalive = next(row for row in data["costs"] if row["name"] == "keepalive_tls")
    first, second = keepalive["cells"]
    assert (first["delta"], second["delta"]) == (100, 500)
    assert first["change"] is None
    assert second["change"]["delta"] == 400 and second["change"]["significance"] == "significant"
    tls_p50 = next(row for row in data["arms"] if row["arm"] == "tls" and row["metric"] == "ttlb_p50_us")
    assert tls_p50["values"] == [500, 900] and tls_p50["changes"][1] == {"delta": 400, "pct": 80.0}
    page = client.get(url, {"runs": f"{a.code},{b.code}"}).content.decode()
    assert page.index('id="setup-differences"') < page.index('id="compare-costs"')
    assert 'data-setting="users"' in page and 'data-significance="significant"' in page


def test_compare_needs_two_visible_runs(client, owner, outsider):
    mine = make_run(owner)
    theirs = make_run(outsider)
    client.force_login(owner)
    url = reverse("runs-compare")
    assert client.get(url, {"runs": str(mine.code)}).status_code == 302
    assert client.get(url, {"runs": f"{mine.code},{theirs.code}"}).status_code == 404
    assert client.get(url, {"runs": f"{mine.code},not-a-uuid"}).status_code == 404


def test_trend_shows_each_succeeded_run_of_the_target(client, owner, outsider):
    first = make_run(owner, target_name="svc", summarize=True, created=timezone.now() - timedelta(days=2))
    second = make_run(
        owner, target_name="svc", arms={"plain": [400] * 100, "tls": [700] * 100}, summarize=True
    )
    make_run(owner, target_name="svc", status=Run.Status.FAILED)
    client.force_login(owner)
    response = client.get(reverse("target-trend", args=[first.target.code]))
    ctx = response.context
    assert [r.pk for r in ctx["runs"]] == [first.pk, second.pk]
    assert [p["delta"] for p in ctx["points"]["keepalive_tls"]] == [100, 300]
    client.force_login(outsider)
    assert client.get(reverse("target-trend", args=[first.target.code])).status_code == 404


def test_report_headline_and_provenance(client, owner):
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100}, seconds=6)
    client.force_login(owner)
    data = client.get(reverse("runs-report-json", args=[run.code])).json()
    assert data["headline"].startswith(
        "TLS on warm (keep-alive) connections adds +0.10 ms median time to last byte"
    )
    assert data["run"]["tollgate"] and len(data["run"]["config_hash"]) == 16
    assert data["arms"]["tls"]["breakdown"]["ttlb_mean_us"] == 500.0
    body = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="headline"' in body and "config hash" in body and 'id="chart-curve"' in body
