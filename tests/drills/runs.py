"""Runs for the drills: a login, a queued run against the local target, polling a run's state in
the database with a deadline, and a browser-like logged-in session on the portal over HTTP."""

from __future__ import annotations

import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.db import close_old_connections

from portal.projects.models import personal_project
from portal.runs import services, starting
from portal.runs.models import ArmResult, Run

PASSWORD = "drill-pass-123"
# 3 arms × (1 s warm-up + 4 s measured), open loop at a modest rate: about 20 s a run.
SHORT_RUN = {
    "arms": ["plain", "tls", "tls_new"],
    "users": 4,
    "spawn_rate": 20,
    "warmup_s": 1,
    "duration_s": 4,
    "arrival_rate": 20,
    "verify_tls": False,
}


def make_owner(username: str = "driller"):
    """A user (password ``PASSWORD``) and their personal project."""
    user = get_user_model().objects.create_user(username, f"{username}@example.test", PASSWORD)
    personal_project(user)
    return user


def queue_run(owner, plain_url: str, tls_url: str, **overrides) -> Run:
    """A queued run in ``owner``'s personal project, checked like the run form (starting.check) but
    not dispatched: ``Stack.dispatch`` sends it to the private broker."""
    project = personal_project(owner)
    form = starting.check(project, {"plain_url": plain_url, "tls_url": tls_url, **SHORT_RUN, **overrides})
    cleaned = form.cleaned_data
    target = services.get_or_create_target(
        project, form.target_name_or_default(), cleaned.get("plain_url"), cleaned.get("tls_url")
    )
    return services.create_run(owner, target, form.engine_config(), source="api", secrets=form.secrets())


def fresh(run: Run) -> Run:
    """The run as the database has it now (a new connection if the old one broke)."""
    close_old_connections()
    return Run.objects.get(pk=run.pk)


def wait_until(check: Callable[[], object], what: str, timeout_s: float, stack=None, every_s: float = 0.2):
    """``check()``'s first truthy answer; fails after ``timeout_s`` with the stack's logs."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            logs = stack.logs() if stack is not None else ""
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s\n{logs}")
        time.sleep(every_s)


def wait_for_status(run: Run, statuses, timeout_s: float, stack=None) -> Run:
    """The run once its status is one of ``statuses`` (a string or a tuple)."""
    wanted = (statuses,) if isinstance(statuses, str) else tuple(statuses)

    def reached():
        now = fresh(run)
        return now if now.status in wanted else None

    return wait_until(reached, f"run {run.code} {'/'.join(wanted)}", timeout_s, stack)


def wait_for_end(run: Run, timeout_s: float, stack=None) -> Run:
    return wait_for_status(run, Run.TERMINAL, timeout_s, stack)


def wait_for_arms(run: Run, count: int, timeout_s: float, stack=None) -> int:
    """Until ``count`` arms of the run are stored; returns how many are."""

    def stored():
        close_old_connections()
        n = ArmResult.objects.filter(run_id=run.pk).count()
        return n if n >= count else 0

    return wait_until(stored, f"{count} arms of run {run.code}", timeout_s, stack)


def arms_of(run: Run) -> list[tuple[str, bool, int]]:
    """(arm, complete, requests) of every stored arm, in run order."""
    close_old_connections()
    rows = ArmResult.objects.filter(run_id=run.pk).order_by("position")
    return [(row.arm, row.complete, row.requests) for row in rows]


def assert_succeeded_with(run: Run, names: list[str]) -> list[tuple[str, bool, int]]:
    """The run succeeded with exactly these arms, each complete and with requests; its arms."""
    assert run.status == Run.Status.SUCCEEDED, run.error
    arms = arms_of(run)
    assert [(name, complete) for name, complete, _ in arms] == [(name, True) for name in names], arms
    assert all(requests > 0 for _, _, requests in arms), arms
    return arms


class PortalSession:
    """A logged-in browser session on the portal: the allauth login form (CSRF token and session
    cookie), then GETs that carry the cookie, as the run page's script does."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def login(self, username: str, password: str = PASSWORD) -> PortalSession:
        page = self.opener.open(self.base_url + "/accounts/login/", timeout=10).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, "the login page has no CSRF token"
        form = {"csrfmiddlewaretoken": token.group(1), "login": username, "password": password}
        request = urllib.request.Request(  # noqa: S310 - the drill's own portal on loopback
            self.base_url + "/accounts/login/",
            data=urllib.parse.urlencode(form).encode(),
            headers={"Referer": self.base_url + "/accounts/login/"},
        )
        with self.opener.open(request, timeout=10) as answer:
            assert "/accounts/login/" not in answer.url, f"login refused: {answer.read()[-500:]!r}"
        assert any(cookie.name == "sessionid" for cookie in self.jar), "no session cookie after login"
        return self

    def get(self, path: str, timeout_s: float = 10) -> tuple[int, bytes]:
        try:
            with self.opener.open(self.base_url + path, timeout=timeout_s) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def json(self, path: str, timeout_s: float = 10) -> dict:
        status, body = self.get(path, timeout_s)
        assert status == 200, f"GET {path}: {status} {body[:500]!r}"
        return json.loads(body)

    def progress(self, run: Run) -> dict:
        """The run page's progress JSON (portal.runs.views.runs_progress)."""
        return self.json(f"/runs/{run.code}/progress.json")
