"""A target's client certificates page on real PostgreSQL: pairs given as PEM files or pasted, checked,
stored encrypted, listed by their public facts and never rendered back (not even on a refused form);
one per key type, a new one replacing the old; forgotten after a confirmation; audited; who may do
what. And the run report's method naming the mTLS arm and its certificate."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from portal import vault
from portal.audit.models import AuditEvent
from portal.lib.tls import certs
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership, Project
from portal.runs.models import Run
from portal.targets.models import ClientCertificate
from tests.engine_config import engine_config
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def ca():
    return certs.make_ca("Page CA")


@pytest.fixture(scope="module")
def pairs(ca):
    return {
        "rsa": certs.make_client_cert(ca, "page-rsa", "rsa"),
        "ecdsa": certs.make_client_cert(ca, "page-ecdsa", "ec"),
        "rsa2": certs.make_client_cert(ca, "page-rsa-2", "rsa"),
    }


@pytest.fixture
def team(django_user_model):
    """A project with one target (from a run) and its owner, member and viewer; an outsider."""
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider")
    }
    project = Project.objects.create(name="mtls")
    for role in ("owner", "member", "viewer"):
        Membership.objects.create(project=project, user=users[role], role=role)
    run = make_run(users["owner"], project=project, target_name="mtls")
    return {"users": users, "target": run.target, "run": run}


def page_url(target) -> str:
    return reverse("target-client-certs", args=[target.code])


def forget_url(target, kind: str) -> str:
    return reverse("target-client-cert-forget", args=[target.code, kind])


def upload(name: str, text: str | bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(
        name, text.encode() if isinstance(text, str) else text, "application/x-pem-file"
    )


def secret_lines(key_pem: str) -> list[str]:
    """Lines of the key's base64: none may appear on any page."""
    return [line for line in key_pem.splitlines() if line and not line.startswith("-----")]


def test_files_and_pastes_are_stored_encrypted_listed_by_their_facts_and_replaced(client, team, pairs):
    target = team["target"]
    client.force_login(team["users"]["member"])  # members add, as on the run form
    empty = client.get(page_url(target)).content.decode()
    assert 'id="no-client-certs"' in empty and 'enctype="multipart/form-data"' in empty
    rsa_cert, rsa_key = pairs["rsa"]
    saved = client.post(
        page_url(target), {"cert_file": upload("c.pem", rsa_cert), "key_file": upload("k.pem", rsa_key)}
    )
    assert saved.status_code == 302 and saved.url == page_url(target)
    stored = ClientCertificate.objects.get(target=target)
    assert stored.key_type == "rsa" and stored.subject == "CN=page-rsa" and stored.issuer == "CN=Page CA"
    assert "BEGIN" not in stored.pair_enc and vault.unseal(stored.pair_enc)["key"].strip() == rsa_key.strip()
    # Pasted, the other key type: held beside it.
    ecdsa_cert, ecdsa_key = pairs["ecdsa"]
    assert client.post(page_url(target), {"cert_pem": ecdsa_cert, "key_pem": ecdsa_key}).status_code == 302
    page = client.get(page_url(target)).content.decode()
    rows = page[page.index('id="client-certs"') : page.index('id="client-cert-form"')]
    assert rows.index('data-key-type="rsa"') < rows.index('data-key-type="ecdsa"')
    for kind in ("rsa", "ecdsa"):
        facts = ClientCertificate.objects.get(target=target, key_type=kind)
        assert (
            facts.subject in rows and facts.fingerprint_sha256 in rows and len(facts.fingerprint_sha256) == 95
        )
        assert facts.not_after.strftime("%Y-%m-%d") in rows
    assert "presents the RSA certificate (RSA when both are held)" in page
    # A new RSA pair replaces the RSA one; the ECDSA one stays.
    new_cert, new_key = pairs["rsa2"]
    replaced = client.post(
        page_url(target), {"cert_pem": new_cert, "key_file": upload("k.pem", new_key)}, follow=True
    )
    said = replaced.content.decode()
    assert "RSA client certificate CN=page-rsa-2 saved, replacing the RSA one held before." in said
    assert sorted(ClientCertificate.objects.filter(target=target).values_list("subject", flat=True)) == [
        "CN=page-ecdsa",
        "CN=page-rsa-2",
    ]
    # No key, no certificate body, on any page the member saw.
    for text in (empty, page, said):
        assert not any(line in text for pair in pairs.values() for line in secret_lines(pair[0] + pair[1]))
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.CREDENTIAL_SAVED, detail__target=str(target.code))
    assert events.count() == 3 and {e.detail["credential"] for e in events} == {"client certificate"}
    assert all(e.actor == team["users"]["member"] for e in events)
    assert not any(line in json.dumps(e.detail) for e in events for line in secret_lines(rsa_key))
    # The targets list (of the project chosen in the switcher) names what the target holds.
    session = client.session
    session[SESSION_KEY] = str(target.project.code)
    session.save()
    listing = client.get(reverse("targets-list")).content.decode()
    assert f'href="{page_url(target)}">RSA, ECDSA</a>' in listing


@pytest.mark.parametrize(
    ("given", "field", "message"),
    [
        ({}, None, "Give both the client certificate and its private key (PEM)."),
        ({"cert": "rsa", "key": "ecdsa"}, None, "The private key does not belong to the certificate"),
        ({"cert_file": "rsa", "cert": "rsa", "key": "rsa"}, "cert_file", "a file or pasted text, not both"),
        ({"cert_file": b"\x30\x82\x03\xff\xa0", "key": "rsa"}, "cert_file", "not PEM text"),
        ({"cert_file": "x" * (64 * 1024 + 1), "key": "rsa"}, "cert_file", "larger than 64 KiB"),
    ],
)
def test_a_refused_pair_says_why_stores_nothing_and_renders_nothing_back(
    client, team, pairs, given, field, message
):
    target = team["target"]
    client.force_login(team["users"]["owner"])
    data = {}
    for name, value in given.items():
        if name == "cert_file":
            data["cert_file"] = upload("c.pem", pairs[value][0] if value in pairs else value)
        else:
            data[f"{name}_pem"] = pairs[value][0 if name == "cert" else 1]
    response = client.post(page_url(target), data)
    assert response.status_code == 200
    form = response.context["form"]
    errors = form.errors.get(field or "__all__")
    assert errors and message in " ".join(errors)
    assert not ClientCertificate.objects.filter(target=target).exists()
    html = response.content.decode()
    assert 'id="error-summary"' in html
    # Neither the key nor the certificate typed comes back in the form.
    assert not any(line in html for pair in pairs.values() for line in secret_lines(pair[0] + pair[1]))


def test_an_upload_larger_than_any_pair_is_refused_unread_and_csrf_still_holds(team, pairs):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(team["users"]["owner"])
    url = page_url(team["target"])
    huge = browser.post(url, {"cert_file": upload("c.pem", "-" * (300 * 1024)), "key_pem": "x"})
    assert huge.status_code == 413 and b"at most 272 KiB" in huge.content
    # The page checks the CSRF token itself (after the size): none, 403; the page's own, saved.
    assert browser.post(url, {"cert_pem": pairs["rsa"][0], "key_pem": pairs["rsa"][1]}).status_code == 403
    assert not ClientCertificate.objects.exists()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', browser.get(url).content.decode())[1]
    data = {"cert_pem": pairs["rsa"][0], "key_pem": pairs["rsa"][1], "csrfmiddlewaretoken": token}
    assert browser.post(url, data).status_code == 302 and ClientCertificate.objects.count() == 1


def test_viewers_read_members_may_not_forget_owners_forget_after_confirming(
    client, team, pairs, django_user_model
):
    target = team["target"]
    client.force_login(team["users"]["owner"])
    for kind in ("rsa", "ecdsa"):
        client.post(page_url(target), {"cert_pem": pairs[kind][0], "key_pem": pairs[kind][1]})
    # The viewer sees the facts, no form, no forget link; may not post.
    client.force_login(team["users"]["viewer"])
    seen = client.get(page_url(target)).content.decode()
    assert "CN=page-ecdsa" in seen and "client-cert-form" not in seen and "forget…" not in seen
    assert (
        client.post(page_url(target), {"cert_pem": pairs["rsa2"][0], "key_pem": pairs["rsa2"][1]}).status_code
        == 403
    )
    # The member adds but may not forget; the outsider sees nothing at all.
    client.force_login(team["users"]["member"])
    assert "forget…" not in client.get(page_url(target)).content.decode()
    assert client.post(forget_url(target, "rsa"), {"confirm": "yes"}).status_code == 403
    client.force_login(team["users"]["outsider"])
    assert client.get(page_url(target)).status_code == 404
    assert client.post(forget_url(target, "rsa"), {"confirm": "yes"}).status_code == 404
    assert ClientCertificate.objects.filter(target=target).count() == 2
    # The owner: a forget link per certificate, a confirmation page first (the house pattern), then
    # the RSA one is gone.
    client.force_login(team["users"]["owner"])
    assert f'href="{forget_url(target, "rsa")}"' in client.get(page_url(target)).content.decode()
    confirm = client.get(forget_url(target, "rsa"))
    assert (
        confirm.status_code == 200
        and "the RSA client certificate of mtls (CN=page-rsa)" in confirm.content.decode()
    )
    assert client.post(forget_url(target, "rsa")).status_code == 200  # no confirm: still asking
    assert ClientCertificate.objects.filter(target=target).count() == 2
    done = client.post(forget_url(target, "rsa"), {"confirm": "yes"}, follow=True)
    assert "The RSA client certificate is forgotten" in done.content.decode()
    assert list(ClientCertificate.objects.filter(target=target).values_list("key_type", flat=True)) == [
        "ecdsa"
    ]
    forgotten = AuditEvent.objects.get(kind=AuditEvent.Kind.CREDENTIAL_FORGOTTEN)
    assert (
        forgotten.detail
        == {
            "credential": "client certificate",
            "target": str(target.code),
            "key": "rsa",
        }
        and forgotten.actor == team["users"]["owner"]
    )
    # Again: nothing to forget; an unknown key type is no page at all.
    again = client.post(forget_url(target, "rsa"), {"confirm": "yes"}, follow=True)
    assert "holds no RSA client certificate to forget" in again.content.decode()
    assert client.get(forget_url(target, "dsa")).status_code == 404


def test_the_reports_method_names_the_mtls_arm_and_its_certificate(client, team, pairs):
    target = team["target"]
    client.force_login(team["users"]["owner"])
    client.post(page_url(target), {"cert_pem": pairs["ecdsa"][0], "key_pem": pairs["ecdsa"][1]})
    facts = ClientCertificate.objects.get(target=target)
    run = make_run(
        team["users"]["owner"],
        project=target.project,
        target_name="mtls",
        arms={"tls_new": [3000] * 50, "tls_mtls": [3400] * 50},
    )
    config = {
        **run.config,
        "client_certs": {
            "ecdsa": {
                "subject": facts.subject,
                "issuer": facts.issuer,
                "fingerprint_sha256": facts.fingerprint_sha256,
            }
        },
    }
    Run.objects.filter(pk=run.pk).update(config=config)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    method = page[page.index('id="method-mtls"') :].split("</dd>")[0]
    assert "tls_mtls: a new connection and a full handshake per request, as tls_new" in method
    assert (
        f"the ECDSA client certificate CN=page-ecdsa (issuer CN=Page CA, SHA-256 {facts.fingerprint_sha256})"
        in method
    )
    assert "client_certificate = tls_mtls − tls_new" in method
    # A run without the arm says nothing of client certificates.
    plain = client.get(reverse("runs-detail", args=[team["run"].code])).content.decode()
    assert 'id="method-mtls"' not in plain and 'id="method"' in plain


def test_the_mtls_url_sends_the_mtls_arm_there_and_only_that_arm(client, team):
    """Members set where the server asks for a client certificate (audited, before and after);
    viewers read it; a non-https URL is refused with the field's error. A run then sends its tls_mtls
    arm there, every other arm to the TLS URL."""
    from portal.runs import services

    target = team["target"]
    client.force_login(team["users"]["viewer"])
    assert 'id="mtls-url-form"' not in client.get(page_url(target)).content.decode()
    assert client.post(page_url(target), {"action": "mtls_url", "mtls_url": "https://x/"}).status_code == 403
    client.force_login(team["users"]["member"])
    refused = client.post(page_url(target), {"action": "mtls_url", "mtls_url": "http://127.0.0.1:8444/1k"})
    assert "Needs an https:// URL" in refused.content.decode()
    url = "https://127.0.0.1:8444/1k"
    saved = client.post(page_url(target), {"action": "mtls_url", "mtls_url": url}, follow=True)
    assert f"The tls_mtls arm of this target&#x27;s runs now goes to {url}" in saved.content.decode()
    target.refresh_from_db()
    assert target.mtls_url == url
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TARGET_CHANGED)
    assert event.detail["before"] == {"mtls_url": ""} and event.detail["after"] == {"mtls_url": url}
    tls = "https://127.0.0.1:8443/1k"
    config = engine_config(dict.fromkeys(("tls", "tls_new", "tls_mtls"), tls), client_certs={})
    moved = services.mtls_arm_to_target(config, target)
    assert [arm["url"] for arm in moved["arms"]] == [tls, tls, url]
    assert config["arms"][2]["url"] == tls  # the caller's config is left as it was
    target.mtls_url = ""
    assert services.mtls_arm_to_target(config, target) is config
