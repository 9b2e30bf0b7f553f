"""Every door to an account asks the same questions, tried on Gunicorn as an attacker would: the
Django admin's login is the portal's (lock-out, per-address limit, second factor, audit), and the
lock-out counts per account however the login is spelled, from whatever address."""

from __future__ import annotations

import time

import pytest
from allauth.account.models import EmailAddress
from allauth.mfa.totp.internal.auth import TOTP, format_hotp_value, generate_totp_secret, hotp_value

from portal.audit.models import AuditEvent
from tests.gunicorn_portal import Browser, refused_unchecked

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "right-pass-4d9e"
WENDY = "wendy-pass-8c1"
# What a staff member's session opens: none of it before the second factor.
STAFF_PAGES = ("/admin/", "/runs/", "/audit/", "/ops/")


def staff(django_user_model, name: str):
    return django_user_model.objects.create_user(
        name, email=f"{name}@example.test", password=PASSWORD, is_staff=True, is_superuser=True
    )


def totp_code(secret: str) -> str:
    return format_hotp_value(hotp_value(secret, int(time.time()) // 30))


def test_the_admin_login_asks_a_totp_account_for_its_second_factor(gunicorn_portal, django_user_model):
    stan = staff(django_user_model, "stan")
    secret = generate_totp_secret()
    TOTP.activate(stan, secret)
    browser = Browser(gunicorn_portal.base_url, "127.0.0.2")

    # Django's own admin form, posted straight with the right password: no session, only the way
    # to the portal's login.
    posted = browser.post("/admin/login/?next=/admin/", {"username": "stan", "password": PASSWORD})
    assert posted.status_code == 302 and posted.headers["Location"].startswith("/accounts/login/?next=")
    assert not any(browser.opens(path) for path in STAFF_PAGES)

    # The admin's door leads to the portal's login, which asks for the second factor first.
    door = browser.get("/admin/login/?next=/admin/")
    assert door.status_code == 302
    login = door.headers["Location"]
    assert login == "/accounts/login/?next=%2Fadmin%2F"
    answer = browser.log_in("stan", PASSWORD, login)
    assert answer.status_code == 302 and answer.headers["Location"] == "/accounts/2fa/authenticate/"
    assert not any(browser.opens(path) for path in STAFF_PAGES)
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.LOGIN, actor=stan).exists()

    answer = browser.post("/accounts/2fa/authenticate/", {"code": totp_code(secret)})
    assert answer.status_code == 302 and answer.headers["Location"] == "/admin/"
    assert all(browser.opens(path) for path in STAFF_PAGES)
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.LOGIN, actor=stan).count() == 1


def admin_door(browser: Browser, username: str, password: str):
    """Log in at /admin/login/ as a person would: open it, fill in the form shown wherever it led
    (Django's admin form, or the portal's), post it there."""
    where, page = browser.follow("/admin/login/?next=/admin/")
    assert page.status_code == 200, (where, page.status_code)
    name = "username" if 'name="username"' in page.text else "login"
    return browser.post(where, {name: username, "password": password})


def test_twelve_wrong_admin_passwords_lock_the_account_the_right_one_is_refused(
    gunicorn_portal, django_user_model
):
    staff(django_user_model, "ada")
    browser = Browser(gunicorn_portal.base_url, "127.0.0.3")
    answers = [admin_door(browser, "ada", f"wrong-{i}") for i in range(12)]
    # Five are checked (and fail), then the account is locked: no password is checked any more.
    assert [refused_unchecked(a) for a in answers] == [False] * 5 + [True] * 7
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.LOGIN_FAILED, actor_name="ada").count() == 5

    assert refused_unchecked(admin_door(browser, "ada", PASSWORD))
    assert not browser.opens("/admin/")
    # The lock is the account's, not only this address's: another address is refused too.
    elsewhere = Browser(gunicorn_portal.base_url, "127.0.0.4")
    assert refused_unchecked(admin_door(elsewhere, "ada", PASSWORD))
    assert not elsewhere.opens("/admin/")
    posted = elsewhere.post("/admin/login/", {"username": "ada", "password": PASSWORD})
    assert posted.status_code == 302 and not elsewhere.opens("/admin/")


@pytest.mark.parametrize(
    ("wrong_as", "right_as"),
    [("vic", "VIC@Example.COM"), ("Vic@example.com", "VIC")],
)
def test_two_accounts_on_one_address_buy_no_guesses(gunicorn_portal, django_user_model, wrong_as, right_as):
    """Sign-up with a taken address makes a second account on it (strict enumeration prevention,
    docs/operations.md): five wrong tries under one spelling lock the account under every other,
    from any address."""
    vic = django_user_model.objects.create_user("vic", email="vic@example.com", password=PASSWORD)
    EmailAddress.objects.create(user=vic, email="vic@example.com", verified=True, primary=True)
    signup = Browser(gunicorn_portal.base_url, "127.0.0.5").post(
        "/accounts/signup/",
        {
            "username": "wendy",
            "email": "vic@example.com",
            "password1": "wendy-pass-8c1",
            "password2": "wendy-pass-8c1",
        },
    )
    assert signup.status_code == 302  # answered as any sign-up: the address is not said to be taken
    on_address = set(
        EmailAddress.objects.filter(email="vic@example.com").values_list("user__username", "verified")
    )
    assert on_address == {("vic", True), ("wendy", False)}

    for i in range(5):
        answer = Browser(gunicorn_portal.base_url, f"127.0.0.{10 + i}").log_in(wrong_as, f"wrong-{i}")
        assert answer.status_code == 200 and not refused_unchecked(answer), i  # checked, and wrong
    browser = Browser(gunicorn_portal.base_url, "127.0.0.20")
    assert refused_unchecked(browser.log_in(right_as, PASSWORD))
    assert not browser.opens("/runs/")
    if "@" not in wrong_as:
        # The other account on the address had no guess checked against it: it is not locked.
        wendy = Browser(gunicorn_portal.base_url, "127.0.0.21")
        assert wendy.log_in("wendy", WENDY).status_code == 302 and wendy.opens("/runs/")
