"""Pages a person can use, in Chromium: a refused form says so where the eye is (a summary at the
top, focused, each error a link to its field), the runs list fits a 1280-pixel screen with one
column per cost, the trend's interval band is a tint, not a block, and the run form says whether a
run joins a target or makes one (the target's own page corrects a URL). Screenshots go to
tests/artifacts/."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.runs.models import Run
from portal.targets.models import Target
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_csp import WATCH
from tests.e2e.test_report_pages import login
from tests.e2e.test_run_flow import CANVAS_INK
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

IN_VIEW = """(selector) => {
  const box = document.querySelector(selector).getBoundingClientRect();
  return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0;
}"""


def test_a_form_error_below_the_fold_is_summarised_at_the_top_and_focused(
    page, live_server, django_user_model
):
    page.add_init_script(WATCH)
    login(page, live_server, django_user_model)
    page.goto(f"{live_server.url}/runs/new/")
    page.fill("#id_plain_url", "http://127.0.0.1:8081/1k")
    page.fill("#id_tls_url", "https://127.0.0.1:8443/1k")
    page.fill("#id_users", "0")  # below the fold of a 900-pixel window
    page.click("form.run-form button[type=submit]")
    page.wait_for_load_state()
    assert not page.evaluate(IN_VIEW, "#id_users")  # the field itself is out of sight…
    assert page.evaluate(IN_VIEW, "#error-summary")  # …its error is not
    assert page.evaluate("document.activeElement.id") == "error-summary"
    link = page.locator("#error-summary a")
    assert link.count() == 1 and link.get_attribute("href") == "#id_users"
    assert "Virtual users: Ensure this value is greater than or equal to 1." in link.inner_text()
    page.screenshot(path=str(ARTIFACTS / "form-error.png"))
    link.click()
    assert page.evaluate("document.activeElement.id") == "id_users"
    assert page.evaluate(IN_VIEW, "#id_users")
    page.fill("#id_users", "2")  # typed where the cursor went
    page.screenshot(path=str(ARTIFACTS / "form-error-field.png"))
    # An error inside a closed section: its link opens the section and reaches the field.
    page.fill("#id_users", "2")
    page.click("summary:has-text('Capacity: saturation search')")
    page.check("#id_saturation_arms_0")
    page.fill("#id_saturation_stage_s", "0")
    page.click("form.run-form button[type=submit]")
    page.wait_for_load_state()
    page.evaluate("document.getElementById('capacity').open = false")
    page.click("#error-summary a[href='#id_saturation_stage_s']")
    assert page.evaluate("document.getElementById('capacity').open")
    assert page.evaluate("document.activeElement.id") == "id_saturation_stage_s"
    assert page.evaluate("window.__csp || []") == [] and page.console_errors == []


FIVE = {
    "plain": [300 + i % 50 for i in range(300)],
    "tls": [380 + i % 60 for i in range(300)],
    "plain_new": [900 + i % 100 for i in range(300)],
    "tls_new": [4000 + i % 400 for i in range(300)],
    "tls_resumed": [1500 + i % 200 for i in range(300)],
}
THREE = {name: FIVE[name] for name in ("plain", "tls", "tls_new")}
MIXED = [{"path": p, "weight": 1} for p in ("/1k", "/2k", "/4k", "/logo.png")]


def test_the_runs_list_fits_1280_pixels_with_one_column_per_cost(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    names = ("checkout-api.internal.example.com:8443/api/v2/cart", "shop", "images.cdn.example.org/logo.png")
    now = timezone.now()
    for i in range(25):  # a full page of the list
        status = Run.Status.FAILED if i % 7 == 3 else Run.Status.SUCCEEDED
        arms = FIVE if i % 2 else THREE
        run = make_run(
            user,
            arms=arms,
            seconds=5,
            summarize=True,
            status=status,
            target_name=names[i % 3],
            created=now - timedelta(hours=i),
        )
        if i % 3 == 1:
            Run.objects.filter(pk=run.pk).update(config={**run.config, "paths": MIXED})
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/runs/")
    assert page.locator("#runs-table tbody tr").count() == 25
    page.screenshot(path=str(ARTIFACTS / "runs-list.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    wrap = page.evaluate("(w => [w.scrollWidth, w.clientWidth])(document.querySelector('.table-wrap'))")
    assert wrap[0] <= wrap[1], wrap  # no scrolling inside the table's box either
    # A target's name breaks between its parts only, never inside an address or before its port.
    broken = page.eval_on_selector_all(
        "#runs-table .run-title .nobr", "spans => spans.filter(s => s.getClientRects().length > 1).length"
    )
    assert broken == 0 and "example.com:8443" in page.inner_text("#runs-table")
    heads = page.locator("#runs-table thead th").all_inner_texts()
    assert [h.split("\n")[0] for h in heads[5:8]] == ["Keep-alive TLS", "New TLS connection", "Handshake"]
    # Two costs, two columns: a run with plain_new has both; one without has the handshake unmeasured.
    five = page.locator("#runs-table tbody tr").nth(1)
    # tls_new − plain (4150 − 325 µs) and tls_new − plain_new (4150 − 950 µs): medians of the arms above.
    assert five.locator("td[data-cost=new_connection_tls]").inner_text().startswith("+3.8")
    assert five.locator("td[data-cost=handshake]").inner_text().startswith("+3.20 ms")
    three = page.locator("#runs-table tbody tr").nth(0)
    assert three.locator("td[data-cost=handshake]").inner_text() == "—"
    # A mixed-path run is titled by its paths.
    assert "shop · /1k, /2k, /4k, /logo.png" in page.locator("#runs-table tbody tr").nth(1).inner_text()
    assert page.console_errors == []


BAND = """() => {
  const chart = Chart.getChart('chart-trend');
  const probe = document.createElement('canvas').getContext('2d');
  return chart.data.datasets.filter(d => d.label.indexOf('95%') >= 0).map(d => {
    probe.fillStyle = '#010203';  // kept when the colour is not a valid one
    probe.fillStyle = d.backgroundColor;
    const m = probe.fillStyle.match(/rgba\\(.*,\\s*([0-9.]+)\\)/);
    return [d.label, probe.fillStyle, m ? Number(m[1]) : 1];
  });
}"""
DARK = """() => {
  const canvas = document.getElementById('chart-trend');
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let dark = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > 200 && Math.max(data[i], data[i + 1], data[i + 2]) < 60) dark++;
  }
  return dark / (data.length / 4);
}"""


def test_the_trend_band_is_a_tint_not_a_black_block(page, live_server, django_user_model):
    user = login(page, live_server, django_user_model)
    runs = []
    for i in range(4):
        run = make_run(
            user,
            arms=FIVE,
            seconds=8,
            summarize=True,
            target_name="shop",
            created=timezone.now() - timedelta(days=4 - i),
        )
        # Intervals as wide as a noisy network gives (the factory's steady series gives hairlines):
        # the band must show, and a band painted black would cover much of the chart.
        costs = [
            {
                **c,
                "delta": c["delta"] * (1 + 0.1 * i),
                "ci95": [c["delta"] * (0.6 + 0.1 * i), c["delta"] * (1.4 + 0.1 * i)],
            }
            for c in run.summary["costs"]
        ]
        Run.objects.filter(pk=run.pk).update(summary={**run.summary, "costs": costs})
        runs.append(run)
    page.goto(f"{live_server.url}/runs/trend/{runs[0].target.code}/")
    page.wait_for_function(f"() => ({CANVAS_INK})('chart-trend') > 300", timeout=10_000)
    bands = page.evaluate(BAND)
    # Low and high edge of each cost's interval: keep-alive, new connection, handshake, resumption.
    assert len(bands) == 8, bands
    for label, colour, alpha in bands:
        assert colour != "#010203" and 0 < alpha <= 0.3, (label, colour)
    assert page.evaluate(DARK) < 0.002  # axis text is grey; a black block would be tens of percent
    # The legend names each cost as the table's header does, never by its report key.
    legend = page.evaluate(
        "() => Chart.getChart('chart-trend').data.datasets.map(d => d.label)"
        ".filter(t => t.indexOf('95%') < 0)"
    )
    headers = page.locator("#trend-table thead th").all_inner_texts()[1:]
    # (the table has a column for every cost a run can have; these runs have the four of five arms)
    assert len(legend) == 4 and set(legend) <= set(headers), (legend, headers)
    assert not any("_" in name for name in legend), legend
    page.locator("#chart-trend").screenshot(path=str(ARTIFACTS / "trend-band.png"))
    assert page.console_errors == []


def test_the_run_form_says_which_target_a_run_joins_and_a_typo_is_fixed_on_the_target(
    page, live_server, django_user_model
):
    page.add_init_script(WATCH)
    user = login(page, live_server, django_user_model)
    run = make_run(user, target_name="shop")
    target = run.target
    page.goto(f"{live_server.url}/runs/new/")
    note = page.locator("#target-note")
    page.fill("#id_plain_url", target.plain_url)
    page.fill("#id_tls_url", target.tls_url)
    assert "the target shop: the run joins it" in note.inner_text()
    page.fill("#id_tls_url", target.tls_url + "x")  # a typo
    assert "starting makes a new target" in note.inner_text()
    page.screenshot(
        path=str(ARTIFACTS / "run-form-target-note.png"),
        clip={"x": 0, "y": 300, "width": 1280, "height": 500},
    )
    note.locator("a", has_text="shop").click()  # the target to correct instead
    page.wait_for_selector("#target-edit")
    page.fill("#id_tls_url", "https://127.0.0.1:2/shop-v2")
    page.screenshot(path=str(ARTIFACTS / "target-edit.png"))
    page.click("#target-edit button[type=submit]")
    page.wait_for_load_state()
    assert "its runs keep the URLs they measured" in page.inner_text(".messages")
    target.refresh_from_db()
    assert target.tls_url == "https://127.0.0.1:2/shop-v2" and target.runs.count() == 1
    assert Target.objects.count() == 1
    page.goto(f"{live_server.url}/runs/new/")
    page.fill("#id_plain_url", target.plain_url)
    page.fill("#id_tls_url", "https://127.0.0.1:2/shop-v2")
    assert "the target shop: the run joins it" in note.inner_text()
    assert page.evaluate("window.__csp || []") == [] and page.console_errors == []
