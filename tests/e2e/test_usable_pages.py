"""Pages a person can use, in Chromium: a refused form says so where the eye is (a summary at the
top, focused, each error a link to its field). Screenshots go to tests/artifacts/."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_csp import WATCH
from tests.e2e.test_report_pages import login

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
