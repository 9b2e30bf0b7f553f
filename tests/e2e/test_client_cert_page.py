"""A target's client certificates page in Chromium: PEM files chosen in the file inputs are uploaded
(multipart, under the page's Content-Security-Policy), the pair is listed by its facts, the key never
shown, and forgetting goes through the confirmation page."""

from __future__ import annotations

import pytest

from portal.lib.tls import certs
from portal.targets.models import ClientCertificate
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_csp import WATCH
from tests.e2e.test_report_pages import login
from tests.runs.factories import make_run

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_upload_list_and_forget_a_client_certificate(page, live_server, django_user_model, tmp_path):
    page.add_init_script(WATCH)
    user = login(page, live_server, django_user_model)
    target = make_run(user).target
    cert_pem, key_pem = certs.make_client_cert(certs.make_ca("E2E CA"), "browser-client", "ec")
    (tmp_path / "client.crt").write_text(cert_pem)
    (tmp_path / "client.key").write_text(key_pem)
    page.goto(f"{live_server.url}/targets/")
    page.click(f"tr[data-target='{target.code}'] a:has-text('add')")
    page.wait_for_load_state()
    assert page.locator("#no-client-certs").is_visible()
    page.set_input_files("#id_cert_file", str(tmp_path / "client.crt"))
    page.set_input_files("#id_key_file", str(tmp_path / "client.key"))
    page.click("#client-cert-form button[type=submit]")
    page.wait_for_load_state()
    row = page.locator("tr[data-key-type='ecdsa']")
    assert "CN=browser-client" in row.inner_text() and "CN=E2E CA" in row.inner_text()
    stored = ClientCertificate.objects.get(target=target)
    assert stored.fingerprint_sha256 in row.inner_text()
    html = page.content()
    assert key_pem.splitlines()[1] not in html and cert_pem.splitlines()[1] not in html
    # The 95-character fingerprint wraps in its cell: the page fits a 1280-pixel window.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(ARTIFACTS / "client-certs.png"), full_page=True)
    page.click("#forget-ecdsa")
    page.wait_for_load_state()
    page.click("#confirm-delete")
    page.wait_for_load_state()
    assert page.locator("#no-client-certs").is_visible()
    assert not ClientCertificate.objects.filter(target=target).exists()
    assert page.evaluate("window.__csp || []") == []
    assert page.console_errors == []
