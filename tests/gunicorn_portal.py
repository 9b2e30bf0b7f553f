"""The portal on a real Gunicorn (``tests.drills.stack``: gthread, the test database, a Redis of
the test's choosing), and a client that goes through its doors as a browser does: cookies, the CSRF
token, no redirect followed unless asked, its connections leaving from a loopback address of its
own (``127.0.0.x``), which is what the portal sees as the client's address.

Tests that use it write what Gunicorn must read, so they run with ``django_db(transaction=True)``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import requests
from requests.adapters import HTTPAdapter

from tests.conftest import database_url_for_children
from tests.drills.stack import Stack


def start_portal(workdir: Path, redis_url: str) -> Stack:
    """Gunicorn on a free loopback port, on the test database and ``redis_url`` (broker and cache:
    rate limits, sessions); returns once Django answers. ``Stack.close`` stops it."""
    stack = Stack(workdir, database_url_for_children(), redis_url)
    try:
        stack.portal()
    except BaseException:
        stack.close()
        raise
    return stack


@pytest.fixture(scope="module")
def gunicorn_portal(django_db_setup, django_db_blocker, tmp_path_factory):
    """One Gunicorn per test module, on the tests' own Redis (whose rate-limit counters every test
    starts without: ``tests/conftest.py``)."""
    with django_db_blocker.unblock():
        stack = start_portal(tmp_path_factory.mktemp("gunicorn"), os.environ["CELERY_BROKER_URL"])
    yield stack
    print(stack.logs())  # shown by pytest when a test failed
    stack.close()


class _FromAddress(HTTPAdapter):
    """Connections bound to ``source`` before they connect."""

    def __init__(self, source: str) -> None:
        self.source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs) -> None:
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


class Browser:
    """One browser at ``source`` (any 127.0.0.0/8 address: all are this host's)."""

    def __init__(self, base_url: str, source: str = "127.0.0.1") -> None:
        self.base_url = base_url
        self.session = requests.Session()
        self.session.mount("http://", _FromAddress(source))

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.base_url + path, allow_redirects=False, timeout=30)

    def post(self, path: str, data: dict) -> requests.Response:
        """A form POST with the CSRF token of this browser's cookie (one page read gets it)."""
        if "csrftoken" not in self.session.cookies:
            self.get("/accounts/login/")
        form = {**data, "csrfmiddlewaretoken": self.session.cookies["csrftoken"]}
        return self.session.post(self.base_url + path, data=form, allow_redirects=False, timeout=30)

    def follow(self, path: str) -> tuple[str, requests.Response]:
        """GET ``path`` and the redirects it leads to: the last URL (path and query) and its answer."""
        answer = self.get(path)
        while answer.status_code in (301, 302, 303):
            path = answer.headers["Location"].removeprefix(self.base_url)
            answer = self.get(path)
        return path, answer

    def log_in(self, login: str, password: str, path: str = "/accounts/login/") -> requests.Response:
        """The portal's login form (allauth), POSTed."""
        return self.post(path, {"login": login, "password": password})

    def opens(self, path: str) -> bool:
        """Whether ``path`` answers this browser's session 200 (not a redirect to the login)."""
        return self.get(path).status_code == 200


def refused_unchecked(answer: requests.Response) -> bool:
    """allauth's answer to a login it did not check (a lock-out or the per-address limit)."""
    return answer.status_code == 429 or "Too many failed login attempts" in answer.text
