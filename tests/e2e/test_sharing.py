"""The shared page in real Chromium, as an auditor without an account sees it: charts drawn under
the CSP with no console error, no request beyond the portal's own address, and nothing of the portal
reachable from it: every link, form action, script and stylesheet stays under ``/s/<token>/`` or
``/static/`` (or is the public keys or verifier), and each of them answers. What it links to download
verifies the report offline with a plain Python."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest

from portal.lib.security import signing
from portal.sharing import services
from portal.signing.services import freeze
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import ARMS, login
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The public report-signing keys and the verifier that reads them (portal/lib/security/signing.py): public by
# design, the only portal URLs outside the link that a shared page links to.
KEYS = "/.well-known/tollgate-report-keys.json"
VERIFIER = "/.well-known/tollgate-verify-report.py"
PUBLIC = (KEYS, VERIFIER)
SIGNING_PY = Path(signing.__file__)
RUN_CHARTS = (
    "chart-ttlb",
    "chart-curve",
    "chart-latency-time",
    "chart-rps-time",
    "chart-breakdown",
    "chart-gen",
)
# Everything the page points at: links, form actions (a form without one posts to the page itself),
# scripts, stylesheets, images.
REFERENCES = """() => [].concat(
  Array.from(document.querySelectorAll('a[href]'), e => e.href),
  Array.from(document.querySelectorAll('form'), e => e.action),
  Array.from(document.querySelectorAll('script[src]'), e => e.src),
  Array.from(document.querySelectorAll('link[href]'), e => e.href),
  Array.from(document.querySelectorAll('img[src], iframe[src]'), e => e.src),
)"""


def watch_requests(page) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    return seen


def crawl(page, base: str, token: str) -> dict[str, object]:
    """Every reference of the page: on the portal's own address, under the link or /static/; fetched
    (no cookies: the context never logged in), each must answer 200. Returns {url: response}."""
    host = urlsplit(base).netloc
    answers = {}
    for ref in page.evaluate(REFERENCES):
        parts = urlsplit(ref)
        if parts.scheme == "data":  # the inline empty favicon: no request at all
            continue
        assert parts.scheme == "http" and parts.netloc == host, ref
        assert parts.path.startswith((f"/s/{token}/", "/static/")) or parts.path in PUBLIC, (
            f"leads out of the share link: {ref}"
        )
        url = urldefrag(ref).url
        if url not in answers:
            answers[url] = page.request.get(url, max_redirects=0)
            assert answers[url].status == 200, (url, answers[url].status)
    return answers


def assert_local_only(requests: list[str], base: str) -> None:
    host = urlsplit(base).netloc
    assert requests, "the page made no request at all?"
    away = [url for url in requests if urlsplit(url).scheme != "data" and urlsplit(url).netloc != host]
    assert away == [], away
    assert urlsplit(base).hostname in ("127.0.0.1", "localhost")


def test_shared_run_page_draws_its_charts_and_leads_nowhere_else(page, live_server, django_user_model):
    owner = django_user_model.objects.create_user("dana", password="dana-pass-123")
    run = make_run(owner, arms=ARMS, seconds=8, summarize=True)
    frozen = freeze(run)  # as when the run ended: the shared JSON is the signed report
    link, token = services.create_share(owner, run=run, note="Q3 audit, PCI 4.1")
    requests = watch_requests(page)
    response = page.goto(f"{live_server.url}/s/{token}/")
    assert response.status == 200
    assert response.headers["x-robots-tag"] == "noindex, nofollow"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    for canvas in RUN_CHARTS:
        page.wait_for_function(f"() => ({CANVAS_INK})('{canvas}') > 300", timeout=10_000)
    assert "a full TLS handshake per request adds" in page.inner_text("#headline")
    assert page.inner_text("#share-note") == "Shared for: Q3 audit, PCI 4.1"
    assert page.get_attribute('meta[name="robots"]', "content").startswith("noindex")
    assert page.locator("nav").count() == 0 and page.locator("#project-switcher").count() == 0
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(ARTIFACTS / "shared-report.png"), full_page=True)
    assert page.console_errors == []
    assert_local_only(requests, live_server.url)

    answers = crawl(page, live_server.url, token)
    downloads = {urlsplit(url).path: answer for url, answer in answers.items()}
    report = downloads[f"/s/{token}/report.json"].json()
    assert report["run"]["id"] == str(run.code) and report["costs"]
    # The auditor's check: the downloaded report verifies against the published keys, as shown.
    assert page.inner_text("#integrity-sha256") == frozen.sha256 == report["integrity"]["sha256"]
    assert signing.verify(report, signing.parse_keys(downloads[KEYS].json())) == []
    rows = list(csv.reader(io.StringIO(downloads[f"/s/{token}/report.csv"].text())))
    assert rows[0][:3] == ["run", "arm", "metric"] and len(rows) > 20
    assert any(path.startswith("/static/") for path in downloads)
    link.refresh_from_db()
    assert link.view_count >= 3  # the page, the JSON and the CSV (the page again for the form's action)


def test_an_auditor_verifies_offline_what_the_shared_page_offers(
    page, live_server, django_user_model, tmp_path
):
    """Logged out, the auditor downloads the report JSON, the public keys and the verification script
    from the shared page's links, then runs the command the page shows with a plain Python: no Django,
    no settings, no network. The script is portal/lib/security/signing.py itself; a changed digit fails."""
    owner = django_user_model.objects.create_user("gail", password="gail-pass-123")
    run = make_run(owner, arms=ARMS, seconds=8, summarize=True)
    frozen = freeze(run)
    _, token = services.create_share(owner, run=run)
    assert page.goto(f"{live_server.url}/s/{token}/").status == 200
    saved = {}
    for link in ("#verify-report-json", "#verify-keys", "#verify-script"):
        with page.expect_download() as download:
            page.click(link)
        saved[link] = tmp_path / download.value.suggested_filename
        download.value.save_as(saved[link])
    assert [path.name for path in saved.values()] == [
        f"tollgate-run-{run.code}.json",
        "tollgate-report-keys.json",
        "tollgate-verify-report.py",
    ]
    assert saved["#verify-script"].read_bytes() == SIGNING_PY.read_bytes()  # one source, served
    # The page's command, as written, with this interpreter for "python": isolated (-I: no PYTHONPATH,
    # no user site, not the checkout's directory), without Django's settings, in the download folder.
    command = page.inner_text("#verify-command").split()
    assert command[:2] == ["python", "tollgate-verify-report.py"]
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}

    def verify() -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603 - our interpreter, the page's arguments
            [sys.executable, "-I", *command[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    intact = verify()
    assert intact.returncode == 0, intact.stderr
    assert intact.stdout.startswith(f"intact: sha256 {frozen.sha256}, signed by key "), intact.stdout
    report = saved["#verify-report-json"].read_text()
    saved["#verify-report-json"].write_text(report.replace('"requests": ', '"requests": 1', 1))
    changed = verify()
    assert changed.returncode == 1 and "FAILED: the report's content changed" in changed.stderr
    assert page.console_errors == []


def test_shared_compare_page(page, live_server, django_user_model):
    owner = django_user_model.objects.create_user("erin", password="erin-pass-123")
    runs = [make_run(owner, arms=ARMS, seconds=8, summarize=True) for _ in range(2)]
    _, token = services.create_share(owner, runs=runs, note="before/after")
    requests = watch_requests(page)
    assert page.goto(f"{live_server.url}/s/{token}/").status == 200
    for canvas in ("chart-costs", "chart-curves"):
        page.wait_for_function(f"() => ({CANVAS_INK})('{canvas}') > 300", timeout=10_000)
    assert page.locator("#compare-runs li").count() == 2
    page.wait_for_load_state("networkidle")
    assert page.console_errors == []
    assert_local_only(requests, live_server.url)
    answers = crawl(page, live_server.url, token)
    data = next(a for url, a in answers.items() if url.endswith("/compare.json")).json()
    assert len(data["costs"][0]["cells"]) == 2


def test_revoked_link_page_in_the_browser(page, live_server, django_user_model):
    owner = django_user_model.objects.create_user("fred", password="fred-pass-123")
    link, token = services.create_share(owner, run=make_run(owner, arms=ARMS))
    services.revoke(link, owner)
    response = page.goto(f"{live_server.url}/s/{token}/")
    assert response.status == 410
    assert (
        "revoked" in page.inner_text("h1")
        and page.locator("#share-gone").get_attribute("data-reason") == "revoked"
    )
    # Chromium reports the document's own 410; nothing else may fail.
    assert [e for e in page.console_errors if "status of 410" not in e] == []
    assert response.headers["referrer-policy"] == "no-referrer"


def test_owner_shares_from_the_run_page_and_revokes(page, browser, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    run = make_run(user, arms=ARMS, seconds=8, summarize=True)
    page.goto(f"{live_server.url}/runs/{run.code}/")
    page.fill("#share-form #id_days", "7")
    page.fill("#share-form #id_note", "Q3 audit, PCI 4.1")
    page.click("#share-form button[type=submit]")
    page.wait_for_selector("#share-url")
    url = page.input_value("#share-url")
    assert url.startswith(f"{live_server.url}/s/")
    # The auditor, in a browser of their own (no session): the report.
    auditor = browser.new_context()
    try:
        shared = auditor.new_page()
        assert shared.goto(url).status == 200
        shared.wait_for_function(f"() => ({CANVAS_INK})('chart-ttlb') > 300", timeout=10_000)
        # The owner sees the view on the run page, then revokes the link there.
        page.goto(f"{live_server.url}/runs/{run.code}/")
        row = page.locator("#share table.share-links tbody tr")
        assert row.count() == 1 and row.locator("[data-views]").inner_text() == "1"
        assert url not in page.content()  # shown once
        page.locator("#share").screenshot(path=str(ARTIFACTS / "share-panel.png"))
        row.locator("button[data-revoke]").click()
        page.wait_for_load_state()
        assert page.locator("#share tbody tr").get_attribute("data-state") == "revoked"
        assert page.url.startswith(f"{live_server.url}/runs/{run.code}/")
        assert page.goto(f"{live_server.url}/shares/").status == 200
        assert page.locator('#share-list tr[data-state="revoked"]').count() == 1
        assert shared.goto(url).status == 410
        assert "revoked" in shared.inner_text("#share-gone")
    finally:
        auditor.close()
    assert page.console_errors == []
