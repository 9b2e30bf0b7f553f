"""Accounts on allauth: throttled logins, the demo login, sign-up switch, reset by e-mail, TOTP, headers."""

from __future__ import annotations

import re
import time
import types

import pytest
from allauth.core.internal import ratelimit
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import SECRET_SESSION_KEY, format_hotp_value, hotp_value
from django.core import mail
from django.urls import reverse

from portal.audit.models import AuditEvent
from portal.console.demo import DEMO_PASSWORD, DEMO_USER, ensure_demo_user

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def log_in(client, login: str, password: str):
    return client.post(LOGIN, {"login": login, "password": password})


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_sixty_wrong_passwords_are_throttled_and_the_right_one_waits_for_the_window(
    client, owner, monkeypatch
):
    answers = [log_in(client, "owner", f"wrong-{i}") for i in range(60)]
    refused = [
        i
        for i, r in enumerate(answers)
        if r.status_code == 429 or b"Too many failed login attempts" in r.content
    ]
    # Five tries per login in five minutes, then every attempt is refused without checking the password.
    assert refused == list(range(5, 60))
    assert AuditEvent.objects.filter(kind="login_failed", actor_name="owner").count() == 5

    response = log_in(client, "owner", "owner-pass-123")
    assert not logged_in(client)
    assert b"Too many failed login attempts" in response.content or response.status_code == 429

    # Five minutes later the right password works again.
    later = time.time() + 301
    monkeypatch.setattr(
        ratelimit,
        "time",
        types.SimpleNamespace(time=lambda: later, monotonic=time.monotonic, sleep=time.sleep),
    )
    response = log_in(client, "owner", "owner-pass-123")
    assert response.status_code == 302 and response["Location"] == "/runs/"
    assert logged_in(client)
    assert AuditEvent.objects.filter(kind="login", actor__username="owner").count() == 1


def _refused(response) -> bool:
    return response.status_code == 429 or b"Too many failed login attempts" in response.content


@pytest.mark.parametrize(
    ("wrong_as", "right_as"), [("viewer", "viewer@example.test"), ("viewer@example.test", "VIEWER")]
)
def test_failures_count_per_account_whatever_login_is_typed(client, django_user_model, wrong_as, right_as):
    """Five failures lock the account, not the text typed: its e-mail address (or its username in
    other letters) does not open it."""
    django_user_model.objects.create_user("viewer", email="viewer@example.test", password="viewer-pass-123")
    django_user_model.objects.create_user("other", email="other@example.test", password="other-pass-123")
    for i in range(5):
        assert not _refused(log_in(client, wrong_as, f"wrong-{i}"))
    assert _refused(log_in(client, right_as, "viewer-pass-123")) and not logged_in(client)
    assert _refused(log_in(client, "viewer", "viewer-pass-123")) and not logged_in(client)
    # Another account is not locked by the first one's failures.
    assert log_in(client, "other@example.test", "other-pass-123").status_code == 302 and logged_in(client)


def test_failures_count_per_address(client, owner, django_user_model):
    """Ten failures a minute from one address, spread over as many logins (known or not), refuse
    that address even the right password; another address still logs in."""
    for i in range(10):
        login = f"nobody-{i}" if i % 2 else f"nobody-{i}@example.test"
        assert not _refused(client.post(LOGIN, {"login": login, "password": "x"}, REMOTE_ADDR="192.0.2.7"))
    refused = client.post(LOGIN, {"login": "owner", "password": "owner-pass-123"}, REMOTE_ADDR="192.0.2.7")
    assert _refused(refused) and not logged_in(client)
    elsewhere = client.post(
        LOGIN, {"login": "owner", "password": "owner-pass-123"}, REMOTE_ADDR="198.51.100.7"
    )
    assert elsewhere.status_code == 302 and logged_in(client)


def test_the_demo_user_logs_in_with_the_printed_login(client):
    ensure_demo_user()
    response = log_in(client, DEMO_USER, DEMO_PASSWORD)
    assert response.status_code == 302 and response["Location"] == "/runs/"
    assert client.get("/runs/").status_code == 200


def test_login_by_e_mail_address(client, django_user_model):
    django_user_model.objects.create_user("dora", email="dora@example.org", password="dora-pass-123")
    assert log_in(client, "dora@example.org", "dora-pass-123").status_code == 302
    assert logged_in(client)


def test_sign_up_is_the_operators_switch(client, settings, django_user_model):
    data = {
        "username": "erin",
        "email": "erin@example.org",
        "password1": "erin-long-pass-7",
        "password2": "erin-long-pass-7",
    }
    settings.TOLLGATE_SIGNUP = False
    assert b"Create an account" not in client.get(LOGIN).content
    response = client.post("/accounts/signup/", data)
    assert b"Sign Up Closed" in response.content
    assert not django_user_model.objects.filter(username="erin").exists()

    settings.TOLLGATE_SIGNUP = True
    assert b"Create an account" in client.get(LOGIN).content
    response = client.post("/accounts/signup/", data)
    assert response.status_code == 302
    assert django_user_model.objects.filter(username="erin").exists()
    assert AuditEvent.objects.filter(kind="signup", actor_name="erin").exists()
    # The address confirmation is mailed.
    assert any("erin@example.org" in m.to for m in mail.outbox)


@pytest.mark.parametrize(
    ("verification", "answer"),
    [
        ("none", (302, "/runs/", True)),
        ("optional", (302, "/runs/", True)),
        ("mandatory", (302, "/accounts/confirm-email/", False)),  # allauth mails the owner instead
    ],
)
def test_sign_up_does_not_tell_whether_an_address_is_registered(
    client, settings, django_user_model, verification, answer
):
    """Without mandatory verification a sign-up logs in at once; with an address already registered
    it must answer the same (allauth's strict enumeration prevention), not "already registered"."""
    settings.TOLLGATE_SIGNUP = True
    settings.ACCOUNT_EMAIL_VERIFICATION = verification
    django_user_model.objects.create_user("gail", email="gail@example.org", password="gail-pass-123")
    answers = []
    for username, email in (("hank", "hank@example.org"), ("ivan", "gail@example.org")):
        client.logout()
        data = {
            "username": username,
            "email": email,
            "password1": "long-pass-7x9",
            "password2": "long-pass-7x9",
        }
        response = client.post("/accounts/signup/", data)
        answers.append((response.status_code, response.get("Location"), logged_in(client)))
    assert answers[0] == answers[1] == answer
    assert log_in(client, "gail@example.org", "gail-pass-123").status_code == 302  # the owner still logs in


def test_password_reset_by_e_mail(client, django_user_model):
    django_user_model.objects.create_user("fay", email="fay@example.org", password="fay-old-pass-1")
    response = client.post("/accounts/password/reset/", {"email": "fay@example.org"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    link = re.search(r"https?://[^/\s]+(/accounts/password/reset/key/\S+/)", mail.outbox[0].body).group(1)
    response = client.get(link, follow=True)
    form_url = response.redirect_chain[-1][0] if response.redirect_chain else link
    new = "fay-new-pass-22"
    response = client.post(form_url, {"password1": new, "password2": new})
    assert response.status_code == 302
    assert AuditEvent.objects.filter(kind="password_reset", actor_name="fay").exists()
    client.logout()
    assert log_in(client, "fay", "fay-old-pass-1").status_code == 200 and not logged_in(client)
    assert log_in(client, "fay", new).status_code == 302 and logged_in(client)


def test_a_password_reset_by_mail_lifts_the_accounts_lock(client, django_user_model):
    """Five failures lock the account under every spelling; a reset through its mailbox lifts the
    lock (as allauth does for the address typed), and the new password logs in."""
    django_user_model.objects.create_user("gus", email="gus@example.org", password="gus-old-pass-1")
    for i in range(5):
        log_in(client, "GUS", f"wrong-{i}")
    assert _refused(log_in(client, "gus@example.org", "gus-old-pass-1"))
    client.post("/accounts/password/reset/", {"email": "gus@example.org"})
    link = re.search(r"https?://[^/\s]+(/accounts/password/reset/key/\S+/)", mail.outbox[-1].body).group(1)
    response = client.get(link, follow=True)
    form_url = response.redirect_chain[-1][0] if response.redirect_chain else link
    new = "gus-new-pass-22"
    assert client.post(form_url, {"password1": new, "password2": new}).status_code == 302
    client.logout()
    assert log_in(client, "gus", new).status_code == 302 and logged_in(client)


def test_totp_second_factor_can_be_enabled_and_is_asked_at_login(
    client, owner, django_capture_on_commit_callbacks
):
    assert log_in(client, "owner", "owner-pass-123").status_code == 302
    assert client.get("/accounts/2fa/").status_code == 200
    # Changing the second factor asks for the password again first.
    response = client.get("/accounts/2fa/totp/activate/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/reauthenticate/")
    response = client.post(response["Location"], {"password": "owner-pass-123"})
    assert response.status_code == 302
    response = client.get("/accounts/2fa/totp/activate/")
    assert response.status_code == 200
    assert b"data:image/svg+xml" in response.content  # the QR code, an image CSP allows
    secret = client.session[SECRET_SESSION_KEY]
    code = format_hotp_value(hotp_value(secret, int(time.time()) // 30))
    with django_capture_on_commit_callbacks(execute=True):  # allauth signals after the commit
        response = client.post("/accounts/2fa/totp/activate/", {"code": code})
    assert response.status_code == 302
    assert Authenticator.objects.filter(user=owner, type="totp").exists()
    assert AuditEvent.objects.filter(kind="mfa_added", actor=owner).exists()

    client.logout()
    response = log_in(client, "owner", "owner-pass-123")
    assert response.status_code == 302 and response["Location"] == "/accounts/2fa/authenticate/"
    assert not logged_in(client)


def test_security_headers(client, owner):
    response = client.get(LOGIN)
    policy = response["Content-Security-Policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    for directive in (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ):
        assert directive in policy
    assert "camera=()" in response["Permissions-Policy"]
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_audit_page_shows_operators_everything_and_owners_their_projects(
    client, owner, outsider, django_user_model
):
    from portal.audit import log as audit
    from portal.audit.models import AuditEvent
    from portal.projects.models import personal_project

    log_in(client, "owner", "wrong")
    mine = personal_project(owner)
    audit.record(
        None, AuditEvent.Kind.MEMBER_ADDED, actor=owner, member="ann", role="viewer", project_id=mine.pk
    )
    theirs = personal_project(outsider)
    audit.record(
        None, AuditEvent.Kind.CREDENTIAL_SAVED, actor=outsider, credential="ssh", project_id=theirs.pk
    )
    client.force_login(owner)
    response = client.get(reverse("audit-list"))
    assert response.status_code == 200
    kinds = [event.kind for event in response.context["page"].object_list]
    # An owner sees their project's events, not another project's, nor the unscoped login failures.
    assert kinds == [AuditEvent.Kind.MEMBER_ADDED]
    operator = django_user_model.objects.create_user("op", password="op-pass-123", is_staff=True)
    client.force_login(operator)
    response = client.get(reverse("audit-list"))
    assert response.status_code == 200
    kinds = {event.kind for event in response.context["page"].object_list}
    assert {AuditEvent.Kind.LOGIN_FAILED, AuditEvent.Kind.CREDENTIAL_SAVED} <= kinds
    assert b"127.0.0.0/24" in response.content  # the network, not the address
