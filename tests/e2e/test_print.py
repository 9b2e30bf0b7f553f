"""A five-arm report on paper and on a laptop screen: every table column inside the page; a shared
report on paper without its share token.

Chromium prints the page to an A4 PDF; pdftoppm (poppler-utils) renders it to PNG for a person to
look at (tests/artifacts/report-print-*.png, shared-print-*.png) and to PPM for the test to check
that nothing is drawn in the right margin. The DOM under print media at the printable width says the
same per table. pdftotext (poppler-utils too) reads what a printed shared page says.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from portal.runs.models import ArmResult
from portal.sharing import services
from portal.signing.services import freeze
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
# A4 portrait, 12 mm left and right margins (static/css/tollgate.css @page): 186 mm of 96-dpi CSS
# pixels. Top and bottom margins are 0 (the browser's header and footer go there); the body's padding,
# repeated on every page, keeps the content off those edges.
PRINT_WIDTH_PX = int(186 / 25.4 * 96)
PAGE_MARGIN_MM = 12
TABLES = ("answer-table", "cost-table", "arm-table", "split-table", "server-cpu-table", "generator-cpu-table")

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


# The page margins the page asks for in CSS (the last @page rule that sets each wins; none set: Chrome's
# default of about 1 cm). Chrome's print dialog offers its header and footer, which print the page's
# URL, only when the top or the bottom margin is above 0 (print_preview's isHeaderFooterAvailable_ with
# the default margins, which are the page's CSS margins). Headless printToPDF draws them whatever the
# margins, so the test asks the page, as the dialog does, and prints the way the dialog would.
PAGE_MARGINS = """() => {
  const found = {top: '1cm', bottom: '1cm'};
  const visit = rules => Array.from(rules).forEach(rule => {
    if (rule instanceof CSSPageRule) {
      if (rule.style.marginTop) { found.top = rule.style.marginTop; }
      if (rule.style.marginBottom) { found.bottom = rule.style.marginBottom; }
    } else if (rule instanceof CSSMediaRule && window.matchMedia(rule.conditionText).matches) {
      visit(rule.cssRules);
    }
  });
  Array.from(document.styleSheets).forEach(sheet => visit(sheet.cssRules));
  return found;
}"""
# Chrome's own header (date, title) and footer (URL, page of pages), as its print dialog prints them.
CHROME_HEADER = (
    '<div style="font-size:8px;width:100%;display:flex;justify-content:space-between;padding:0 10mm">'
    '<span class="date"></span><span class="title"></span><span></span></div>'
)
CHROME_FOOTER = (
    '<div style="font-size:8px;width:100%;display:flex;justify-content:space-between;padding:0 10mm">'
    '<span class="url"></span>'
    '<span><span class="pageNumber"></span>/<span class="totalPages"></span></span></div>'
)


def print_as_the_dialog(page) -> tuple[str, dict]:
    """The page printed to A4 as Chrome's print dialog prints it by default, as text (pdftotext), and
    the margins that decided whether the dialog's header and footer were printed."""
    margins = page.evaluate(PAGE_MARGINS)
    offered = any(float(value.rstrip("abcdefghijklmnopqrstuvwxyz%") or 0) > 0 for value in margins.values())
    pdf = page.pdf(
        format="A4",
        print_background=True,
        display_header_footer=offered,
        header_template=CHROME_HEADER,
        footer_template=CHROME_FOOTER,
    )
    (ARTIFACTS / "last-print.pdf").write_bytes(pdf)
    text = subprocess.run(
        ["pdftotext", "-layout", "-", "-"], input=pdf, check=True, capture_output=True
    ).stdout
    return text.decode(), {**margins, "header_and_footer": offered}


def inked_rows(ppm: bytes) -> tuple[int, list[int]]:
    """The height of a binary PPM (P6) and its rows with a non-white pixel."""
    header, _, rest = ppm.partition(b"\n")
    assert header == b"P6"
    dims, _, rest = rest.partition(b"\n")
    width, height = (int(x) for x in dims.split())
    _maxval, _, pixels = rest.partition(b"\n")
    row_bytes = width * 3
    return height, [y for y in range(height) if min(pixels[y * row_bytes : (y + 1) * row_bytes]) < 200]


def test_a_shared_report_prints_without_its_token(page, live_server, django_user_model, tmp_path):
    """Printed as Chrome's dialog prints it (its header and footer if the page leaves them room), a
    shared report holds its token nowhere: not in a footer, not in the text. Its own footer, with the
    run's id, is on every page, and the content keeps off the paper's top and bottom edges."""
    owner = django_user_model.objects.create_user("hana", password="hana-pass-123")
    run = five_arm_run(owner)
    frozen = freeze(run)
    _, token = services.create_share(owner, run=run, note="Q3 audit")
    page.goto(f"{live_server.url}/s/{token}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-ttlb') > 300", timeout=10_000)
    page.emulate_media(media="print")
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    # The evidence, after the results per arm, stays one line per check on paper; the rest of the
    # report is opened for print (printToPDF sends afterprint: this is the page as it prints).
    evidence_blocks = page.locator("#evidence details").count()
    opened = page.locator("#evidence details[open]").count(), page.locator("#costs details[open]").count()
    text, margins = print_as_the_dialog(page)
    pdf_path = ARTIFACTS / "shared-print.pdf"
    (ARTIFACTS / "last-print.pdf").replace(pdf_path)
    pages = text.count("\f")
    assert pages >= 2
    assert token not in text.replace("\n", "").replace(" ", "") and "/s/" not in text, margins
    assert not margins["header_and_footer"], margins
    footer = f"Tollgate report {run.code} · shared read-only · signed, sha256 {frozen.sha256[:16]}…"
    assert text.count(footer) == pages, (pages, text.count(footer))
    assert evidence_blocks >= 3 and opened == (0, 1), (evidence_blocks, opened)
    assert text.index("Results per arm") < text.index("Evidence of the validity checks")
    assert "FAIL status_codes: tls_resumed · 8 lines of JSON" in text

    for old in ARTIFACTS.glob("shared-print-*.png"):
        old.unlink()
    subprocess.run(
        ["pdftoppm", "-png", "-r", "80", str(pdf_path), str(ARTIFACTS / "shared-print")], check=True
    )
    # On every page nothing within 8 mm of the top edge (the body's padding is 10 mm, repeated on
    # each page) or 3 mm of the bottom one (the footer stands 5 mm above it).
    dpi = 50
    subprocess.run(["pdftoppm", "-r", str(dpi), str(pdf_path), str(tmp_path / "s")], check=True)
    for ppm in sorted(tmp_path.glob("s-*.ppm")):
        height, rows = inked_rows(ppm.read_bytes())
        assert rows, ppm.name
        assert rows[0] >= 8 / 25.4 * dpi, (ppm.name, rows[0])
        assert rows[-1] <= height - 3 / 25.4 * dpi, (ppm.name, height - rows[-1])
    assert page.console_errors == []


def test_a_shared_compare_view_prints_without_its_token(page, live_server, django_user_model):
    owner = django_user_model.objects.create_user("ines", password="ines-pass-123")
    runs = [make_run(owner, arms=FIVE_ARMS, seconds=8, summarize=True) for _ in range(2)]
    _, token = services.create_share(owner, runs=runs)
    page.goto(f"{live_server.url}/s/{token}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-costs') > 300", timeout=10_000)
    page.emulate_media(media="print")
    text, margins = print_as_the_dialog(page)
    assert token not in text.replace("\n", "").replace(" ", "") and "/s/" not in text, margins
    assert text.count("Tollgate compare of 2 runs · shared read-only") == text.count("\f") >= 1
    assert page.console_errors == []
