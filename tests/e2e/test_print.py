"""A five-arm report on paper and on a laptop screen: every table column inside the page.

Chromium prints the page to an A4 PDF; pdftoppm (poppler-utils) renders it to PNG for a person to
look at (tests/artifacts/report-print-*.png) and to PPM for the test to check that nothing is drawn
in the right margin. The DOM under print media at the printable width says the same per table.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from portal.runs.models import ArmResult
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_report_pages import login
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIVE_ARMS = {
    "plain": [300 + i % 50 for i in range(1500)],
    "tls": [380 + i % 60 for i in range(1500)],
    "plain_new": [900 + i % 100 for i in range(1500)],
    "tls_new": [4000 + i % 400 for i in range(1500)],
    "tls_resumed": [2100 + i % 300 for i in range(1500)],
}
SERVER_CPU_MS = {"plain": 0.02, "tls": 0.03, "plain_new": 0.05, "tls_new": 0.65, "tls_resumed": 0.21}
# A4 portrait, 12 mm margins (static/css/tollgate.css @page): 186 mm of 96-dpi CSS pixels.
PRINT_WIDTH_PX = int(186 / 25.4 * 96)
PAGE_MARGIN_MM = 12
TABLES = ("cost-table", "arm-table", "split-table", "server-cpu-table", "generator-cpu-table")

TABLES_RIGHT = """() => Array.from(document.querySelectorAll('main table')).map(t => ({
  id: t.id || t.className, right: Math.round(t.getBoundingClientRect().right),
  columns: t.querySelectorAll('thead th').length,
  visible: Array.from(t.querySelectorAll('thead th'))
    .filter(th => th.getBoundingClientRect().width > 0).length
}))"""
SCROLLING_BOXES = """() => Array.from(document.querySelectorAll('main .table-wrap, main pre'))
  .filter(e => e.getClientRects().length && e.scrollWidth > e.clientWidth + 1)
  .map(e => (e.querySelector('table') || e).id || e.tagName)"""


def five_arm_run(user):
    probes = {
        "server": "tollgate@127.0.0.1:22",
        "host_key": {"fingerprint": "SHA256:abc", "pinned": True},
        "errors": [],
    }
    run = make_run(
        user,
        arms=FIVE_ARMS,
        seconds=8,
        server_cpu_ms=SERVER_CPU_MS,
        local_cpu_ms=SERVER_CPU_MS,
        probes=probes,
    )
    # A cut-short arm and a long evidence block: the parts that printed worst.
    ArmResult.objects.filter(run=run, arm="tls_resumed").update(
        complete=False, status_codes={"200": 1490, "503": 10}, errors={}
    )
    return run


def right_margin_inked(ppm: bytes, margin_px: int) -> list[int]:
    """Rows of a binary PPM (P6) with a non-white pixel in the rightmost ``margin_px`` columns."""
    header, _, rest = ppm.partition(b"\n")
    assert header == b"P6"
    dims, _, rest = rest.partition(b"\n")
    width, height = (int(x) for x in dims.split())
    _maxval, _, pixels = rest.partition(b"\n")
    inked = []
    for y in range(height):
        row = pixels[(y * width + width - margin_px) * 3 : (y + 1) * width * 3]
        if any(b < 200 for b in row):
            inked.append(y)
    return inked


def test_five_arm_report_fits_a4_portrait_and_a_laptop_screen(page, live_server, django_user_model, tmp_path):
    user = login(page, live_server, django_user_model)
    run = five_arm_run(user)
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{live_server.url}/runs/{run.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-ttlb') > 300", timeout=10_000)
    assert page.locator("#arm-table tbody tr").count() == 5
    page.click("#costs details summary")  # the full cost table
    for block in page.locator("#evidence details summary").all():
        block.click()
    # A 1366 px laptop: no table scrolls sideways.
    assert page.evaluate(SCROLLING_BOXES) == []
    page.screenshot(path=str(ARTIFACTS / "report-1366.png"), full_page=True)
    for section in ("costs", "report"):
        page.locator(f"#{section}").screenshot(path=str(ARTIFACTS / f"report-1366-{section}.png"))

    # Print media at the printable width of A4 portrait: every table's right edge inside, every
    # column still shown, evidence wrapped rather than cut.
    page.emulate_media(media="print")
    page.set_viewport_size({"width": PRINT_WIDTH_PX, "height": 1100})
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    tables = page.evaluate(TABLES_RIGHT)
    seen = {t["id"] for t in tables}
    assert set(TABLES) <= seen, seen
    too_wide = [t for t in tables if t["right"] > PRINT_WIDTH_PX]
    assert too_wide == [], (PRINT_WIDTH_PX, too_wide)
    assert all(t["visible"] == t["columns"] for t in tables), tables
    assert page.evaluate(SCROLLING_BOXES) == []
    wide = page.evaluate(
        f"""() => Array.from(document.querySelectorAll('main *'))
        .filter(e => e.getBoundingClientRect().right > {PRINT_WIDTH_PX} + 1)
        .slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className)"""
    )
    assert wide == []

    pdf_path = ARTIFACTS / "report-print.pdf"
    page.pdf(path=str(pdf_path), format="A4", print_background=True)
    pdftoppm = shutil.which("pdftoppm")
    assert pdftoppm, "pdftoppm not found: apt-get install poppler-utils (.ci/run does)"
    for old in ARTIFACTS.glob("report-print-*.png"):
        old.unlink()
    subprocess.run([pdftoppm, "-png", "-r", "80", str(pdf_path), str(ARTIFACTS / "report-print")], check=True)
    assert len(list(ARTIFACTS.glob("report-print-*.png"))) >= 2
    # Nothing drawn in the right margin of any page (content cut at the paper's edge would be).
    dpi = 50
    subprocess.run([pdftoppm, "-r", str(dpi), str(pdf_path), str(tmp_path / "p")], check=True)
    margin_px = int((PAGE_MARGIN_MM - 2) / 25.4 * dpi)
    for ppm in sorted(tmp_path.glob("p-*.ppm")):
        assert right_margin_inked(ppm.read_bytes(), margin_px) == [], ppm.name
    assert page.console_errors == []
