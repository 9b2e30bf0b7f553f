"""The API docs page (Swagger UI from npm) in Chromium: it renders every operation from the portal's
own schema, breaks no CSP rule, logs no error, and sends no request anywhere but the portal."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from portal.api import tokens
from portal.api.models import ApiToken
from portal.projects.models import personal_project
from tests.api.test_schema import OPERATIONS
from tests.e2e.test_csp import WATCH
from tests.e2e.test_report_pages import login
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_docs_page_renders_the_schema_and_stays_on_the_portal(page, live_server, django_user_model):
    # By address, so "leaves 127.0.0.1" is what is checked (live_server.url names localhost).
    base = live_server.url.replace("//localhost:", "//127.0.0.1:")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.add_init_script(WATCH)
    response = page.goto(f"{base}/api/v1/docs")
    assert response.status == 200
    policy = response.headers["content-security-policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    page.wait_for_selector(".swagger-ui .opblock")
    page.wait_for_load_state("networkidle")
    summaries = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/api/v1/runs", "/api/v1/runs/{id}/cancel", "/api/v1/targets"} <= {
        s.replace("\u200b", "") for s in summaries
    }
    assert page.locator(".opblock").count() == len(OPERATIONS)  # one block per operation of the schema
    assert page.evaluate("window.__csp || []") == []

    # Try it out, as a user would: authorize with a token, list the runs.
    user = django_user_model.objects.create_user("dora", password="dora-pass-123")
    run = make_run(user)
    _, plaintext = tokens.issue(user, personal_project(user), scope="read", name="docs")
    page.click("button.authorize")
    page.fill(".modal-ux input[type=text], .modal-ux input[type=password]", plaintext)
    page.click(".modal-ux .auth-btn-wrapper button.authorize")
    page.click(".modal-ux button.btn-done")
    page.click("#operations-runs-runs_list .opblock-summary")
    page.click("#operations-runs-runs_list button.try-out__btn")
    page.click("#operations-runs-runs_list button.execute")
    page.wait_for_selector("#operations-runs-runs_list .live-responses-table .response-col_status")
    shown = page.locator("#operations-runs-runs_list .live-responses-table").inner_text()
    assert "200" in shown and str(run.code) in shown
    assert page.evaluate("window.__csp || []") == []
    assert page.console_errors == []
    assert len(requests) >= 5  # page, CSS, two scripts, the schema, the API call
    away = [
        url
        for url in requests
        if not url.startswith("data:") and urlsplit(url).netloc != urlsplit(base).netloc
    ]
    assert away == [] and urlsplit(base).hostname == "127.0.0.1"


def test_a_new_user_makes_a_token_in_the_portal_and_revokes_it(page, live_server, django_user_model):
    """From the navigation to a working token, shown once, then revoked: as a user would, no policy
    broken on the way."""
    page.add_init_script(WATCH)
    user = login(page, live_server, django_user_model)
    page.click("nav >> text=API tokens")
    page.fill("#id_name", "ci")
    page.select_option("#id_scope", "run")
    page.click("form.run-form button[type=submit]")
    plaintext = page.locator("#token-value").inner_text()
    assert plaintext.startswith("tg_")
    token = ApiToken.objects.get(user=user)
    assert token.token_hash == tokens.digest(plaintext) and token.scope == "run"
    page.goto(f"{live_server.url}/tokens/")
    assert plaintext not in page.content() and page.locator("#token-value").count() == 0
    page.click(f"tr[data-token='{token.code}'] button[type=submit]")
    page.wait_for_load_state()
    assert "revoked" in page.locator(f"tr[data-token='{token.code}']").inner_text()
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    assert page.evaluate("window.__csp || []") == [] and page.console_errors == []
