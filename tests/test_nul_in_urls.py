"""A NUL in any URL capture is a 404 (or whatever the route answers to a wrong value), never a 500:
PostgreSQL refuses text with NUL, so a capture that reaches a query unchecked fails the request.
Every route of the resolver is tried, anonymous and as a staff user, with GET and POST."""

from __future__ import annotations

import re

import pytest
from django.urls import URLResolver, get_resolver

pytestmark = pytest.mark.django_db

ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def routes(patterns=None, prefix: str = ""):
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern)


def with_nul(route: str) -> str | None:
    """The route with a NUL (``%00``) in each text capture; None when it has none."""
    # Regular-expression routes (allauth's, the admin's): each named group becomes a NUL, except
    # the reset key's user id (base 36), which must parse for the key to be looked at.
    path = re.sub(r"\(\?P<uidb36>[^)]*\)", "1", route)
    path = re.sub(r"\(\?P<\w+>(?:\[[^]]*\][+*]|\.[+*]|[^)]*)\)", "%00", path)
    path = path.replace("^", "").replace("$", "").replace("\\", "")
    path = re.sub(r"<uuid:\w+>", ZERO_UUID, path)
    path = re.sub(r"<int:\w+>", "1", path)
    path = re.sub(r"<(?:str:|slug:|path:)?\w+>", "%00", path)
    return "/" + path if "%00" in path else None


def test_every_route_with_a_nul_in_a_capture_is_no_server_error(client, owner):
    paths = sorted({p for p in map(with_nul, routes()) if p})
    assert "/hooks/%00" in paths and "/s/%00/" in paths and "/accounts/confirm-email/%00/" in paths
    failed = []
    owner.is_staff = owner.is_superuser = True
    owner.save()
    for who in ("anonymous", "staff"):
        if who == "staff":
            client.force_login(owner)
        for path in paths:
            for method in (client.get, client.post):
                try:
                    status = method(path).status_code
                except Exception as exc:  # noqa: BLE001 - the test client re-raises the view's error
                    status = f"{type(exc).__name__}: {exc}"
                if status == 500 or isinstance(status, str):
                    failed.append((who, method.__name__, path, status))
    assert not failed, failed


def test_a_webhook_id_with_a_nul_is_an_unknown_webhook(client):
    answer = client.post("/hooks/%00", b"{}", content_type="application/json")
    assert answer.status_code == 404 and answer.json()["detail"] == "No such webhook."
