"""Report, compare and trend pages in real Chromium: charts drawn, no console errors, screenshots."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ARMS = {
    "plain": [300 + i % 50 for i in range(1200)],
    "tls": [380 + i % 60 for i in range(1200)],
    "plain_new": [900 + i % 100 for i in range(1200)],
    "tls_new": [4000 + i % 400 for i in range(1200)],
}


def login(page, live_server, django_user_model):
    django_user_model.objects.create_user("carol", password="carol-pass-123")
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_login", "carol")
    page.fill("#id_password", "carol-pass-123")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    return django_user_model.objects.get(username="carol")


def test_report_page_draws_every_chart_and_prints(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = make_run(user, arms=ARMS, seconds=8, summarize=True)
    page.goto(f"{live_server.url}/runs/{run.code}/")
    for canvas in (
        "chart-ttlb",
        "chart-curve",
        "chart-latency-time",
        "chart-rps-time",
        "chart-breakdown",
        "chart-gen",
    ):
        page.wait_for_function(f"() => ({CANVAS_INK})('{canvas}') > 300", timeout=10_000)
    assert "a full TLS handshake per request adds" in page.inner_text("#headline")
    page.screenshot(path=str(ARTIFACTS / "report-full.png"), full_page=True)
    # Phone width: nothing overflows the page sideways except inside scrollable table boxes.
    page.set_viewport_size({"width": 390, "height": 844})
    # Chart.js follows the resize on the next frames.
    page.wait_for_function(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth <= 1",
        timeout=5_000,
    )
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    wide = page.evaluate(
        """() => Array.from(document.querySelectorAll('body *'))
        .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .filter(e => !(e.parentElement && e.parentElement.closest('.table-wrap')))
        .slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className)"""
    )
    assert overflow <= 1, (overflow, wide)
    page.screenshot(path=str(ARTIFACTS / "report-phone.png"), full_page=True)
    # A clean PDF from the browser's print path, charts included.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.emulate_media(media="print")
    assert page.evaluate("getComputedStyle(document.querySelector('.site-header nav')).display") == "none"
    pdf = page.pdf(path=str(ARTIFACTS / "report.pdf"), format="A4", print_background=True)
    assert pdf[:5] == b"%PDF-" and len(pdf) > 50_000
    assert page.console_errors == []


def test_compare_and_trend_pages(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    runs = [
        make_run(user, arms=ARMS, seconds=8, summarize=True, created=timezone.now() - timedelta(days=3 - i))
        for i in range(3)
    ]
    page.goto(f"{live_server.url}/runs/")
    # Ticked oldest first (the table lists newest first), one ticked and unticked again: the compare
    # page takes the order ticked, as the hint says, so the oldest run is the reference.
    for run in runs:
        page.check(f"input[name=runs][value='{run.code}']")
    page.uncheck(f"input[name=runs][value='{runs[1].code}']")
    page.check(f"input[name=runs][value='{runs[1].code}']")
    assert "first you tick" in page.inner_text("#compare-hint")
    page.click("text=Compare selected")
    page.wait_for_selector("#compare-costs")
    assert page.url.endswith(f"?runs={runs[0].code},{runs[2].code},{runs[1].code}")
    assert page.locator("#compare-runs li").first.get_attribute("data-run") == str(runs[0].code)
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-costs') > 300", timeout=10_000)
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-curves') > 300", timeout=10_000)
    page.select_option("#curve-arm", "tls_new")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-curves') > 300", timeout=10_000)
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    page.goto(f"{live_server.url}/runs/trend/{runs[0].target.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-trend') > 300", timeout=10_000)
    assert page.locator("#trend-table tbody tr").count() == 3
    page.screenshot(path=str(ARTIFACTS / "trend.png"), full_page=True)
    assert page.console_errors == []


def test_probed_run_shows_server_cpu_openssl_speed_and_projects_cores(page, live_server, django_user_model):
    from pathlib import Path

    from portal.lib.stats import projection
    from workers.probes.parsers import parse_openssl_speed

    user = login(page, live_server, django_user_model)
    data = Path(__file__).resolve().parent.parent / "probes" / "data"
    probes = {
        "server": "tollgate@127.0.0.1:22",
        "host_key": {"fingerprint": "SHA256:abc", "pinned": True},
        "openssl_speed": {
            "server-a": parse_openssl_speed((data / "openssl-speed-3.0.19.txt").read_text()),
            "server-b": parse_openssl_speed((data / "openssl-speed-1.1.1w.txt").read_text()),
        },
        "errors": ["cryptsetup benchmark: cryptsetup is not installed on the server"],
    }
    per_req = {"plain": 0.02, "tls": 0.03, "plain_new": 0.05, "tls_new": 0.65}
    run = make_run(user, arms=ARMS, seconds=8, summarize=True, server_cpu_ms=per_req, probes=probes)
    page.goto(f"{live_server.url}/runs/{run.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-server-cpu') > 300", timeout=10_000)
    rows = page.locator("#server-cpu-table tbody tr")
    assert rows.count() == 4
    assert "+0.6300 (+3150.0%)" in page.inner_text("#server-cpu-table tr[data-arm=tls_new]")
    assert page.locator("table.openssl-sigs").count() == 2
    assert "OpenSSL 1.1.1w" in page.inner_text("#probes") and "OpenSSL 3.0.19" in page.inner_text("#probes")
    assert "cryptsetup is not installed" in page.inner_text("#probes .probe-error")
    # The projection: typed inputs, the page's number equals the Python formula's.
    page.fill("#proj-rps", "5000")
    page.fill("#proj-new", "10")
    page.wait_for_function("() => document.getElementById('projection-result').dataset.cores !== undefined")
    cores = float(page.get_attribute("#projection-result", "data-cores"))
    expected = projection.project_cores(
        projection.projection_inputs({k: {"server_cpu_ms_per_req": v} for k, v in per_req.items()}),
        5000,
        0.10,
    )
    assert abs(cores - expected) < 1e-6 and abs(cores - 0.345) < 1e-6
    assert "0.35 extra server cores" in page.inner_text("#projection-result")
    assert "tls_new − plain_new" in page.inner_text("#projection-formula")
    page.screenshot(path=str(ARTIFACTS / "report-probes.png"), full_page=True)
    assert page.console_errors == []


def test_the_hybrids_price_at_the_users_peak(page, live_server, django_user_model):
    from portal.lib.tls import advice
    from portal.runs import reporting

    user = login(page, live_server, django_user_model)
    arms = {
        "tls_new": ARMS["tls_new"],
        "tls_new@x25519": [3000 + i % 300 for i in range(1200)],
        "tls_new@mlkem": [3300 + i % 300 for i in range(1200)],
    }
    per_req = {"tls_new": 0.6, "tls_new@x25519": 0.6, "tls_new@mlkem": 0.72}
    run = make_run(user, arms=arms, seconds=8, server_cpu_ms=per_req)  # its report made below
    negotiated = {"protocol": "TLSv1.3", "cert_key_type": "EC", "cert_key_bits": 256}
    run.variants = [
        {
            "name": "tls_new@x25519",
            "variant": {"protocol": None, "group": "x25519", "cert": None, "resumption": None},
            "status": "measured",
            "detail": "",
            "negotiated": {
                **negotiated,
                "group": "x25519",
                "client_handshake_bytes": 300,
                "server_handshake_bytes": 700,
            },
        },
        {
            "name": "tls_new@mlkem",
            "variant": {"protocol": None, "group": "x25519mlkem768", "cert": None, "resumption": None},
            "status": "measured",
            "detail": "",
            "negotiated": {
                **negotiated,
                "group": "X25519MLKEM768",
                "client_handshake_bytes": 1484,
                "server_handshake_bytes": 1772,
            },
        },
    ]
    run.save(update_fields=["variants"])
    run.summary = reporting.summarize(run)
    run.save(update_fields=["summary"])
    (item,) = [a for a in reporting.run_report(run)["advice"] if a.get("hybrid")]
    page.goto(f"{live_server.url}/runs/{run.code}/")
    assert "What the post-quantum hybrid costs" in page.inner_text("#advice")
    page.fill("#hybrid-rps", "2000")
    page.fill("#hybrid-new", "25")
    out = page.locator(".hybrid-cost").first
    page.wait_for_function("() => document.querySelector('.hybrid-cost').dataset.cores !== undefined")
    expected = advice.hybrid_at_peak(item["hybrid"], 2000, 0.25)
    assert abs(float(out.get_attribute("data-cores")) - expected["extra_cores"]) < 1e-6
    text = out.inner_text()
    assert "500.0 handshakes/s" in text and "X25519MLKEM768 instead of x25519" in text
    assert f"{expected['extra_bytes_per_s'] / 1000:.1f} kB/s" in text  # 500 × (1,184 + 1,072) bytes
    # One round stored: the CPU's interval (over rounds) is missing, and the page says so.
    assert item["hybrid"]["server_cpu_ci95"] is None and "unconfirmed" in text
    page.screenshot(path=str(ARTIFACTS / "report-hybrid.png"), full_page=True)
    assert page.console_errors == []
