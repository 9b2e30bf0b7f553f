"""Locust users of the portal load bench (``bench/portal_load`` starts ``locust -f`` on this file).

Configuration comes from the JSON file named by ``PORTAL_LOAD_CONFIG`` (written by the bench: the
seeded accounts, run codes, share tokens and webhook, the user counts, the window and where to write
the results). Five kinds of user, each with a fixed count:

* ``ReportReader`` (closed loop, no think time): logs in, then reads the report page of run 1 (a
  5-arm, 4-round run with full histograms) again and again;
* ``Browser`` (one page a second): logs in, then the runs list, and the compare page of the 5 runs;
* ``ShareViewer`` (one page a second): the read-only share-link page of run 1, no login;
* ``StatusPoller`` (one poll a second): ``/s/<token>/status.json``, as CI polls a run;
* ``WebhookSender`` (one delivery every ``webhook_interval_s``): a signed POST to the scenario's
  webhook with a new idempotency key: each starts a run (queued; the bench runs no worker).

Every answer is checked (status, and for pages a marker of their content); a wrong one is a failure.
Timings are kept per request name inside the measured window only, which opens ``warmup_s`` after
the last user has logged in and closes ``duration_s`` later; then the runner stops. Failures are
counted over the whole test, warm-up and logins included. The results (every sample's time, so the
bench computes exact percentiles, and this process's CPU over the window) go to ``result_path``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
import uuid

import gevent
from locust import FastHttpUser, between, constant, constant_pacing, events, task

from portal.lib.security import hooks as webhooks

CONFIG = json.loads(open(os.environ["PORTAL_LOAD_CONFIG"]).read())  # noqa: SIM115, PTH123 - read once
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
STATE: dict = {
    "logged_in": 0,
    "window": None,  # (start, end) monotonic seconds
    "samples": {},  # name -> [ms, ...] inside the window
    "failures": {},  # name -> count, whole test
    "failure_examples": [],
    "cpu": {},
}
ACCOUNT = itertools.cycle(CONFIG["accounts"])


def _logins_expected() -> int:
    return CONFIG["users"]["readers"] + CONFIG["users"]["browsers"]


def _open_window(environment) -> None:
    start = time.monotonic() + CONFIG["warmup_s"]
    STATE["window"] = (start, start + CONFIG["duration_s"])

    def at_start() -> None:
        gevent.sleep(max(0.0, start - time.monotonic()))
        STATE["cpu"]["start"] = (time.monotonic(), time.process_time())

    def at_end() -> None:
        gevent.sleep(max(0.0, STATE["window"][1] - time.monotonic()))
        STATE["cpu"]["end"] = (time.monotonic(), time.process_time())
        environment.runner.quit()

    gevent.spawn(at_start)
    gevent.spawn(at_end)


@events.request.add_listener
def _on_request(request_type, name, response_time, exception, **kwargs) -> None:
    if exception is not None:
        STATE["failures"][name] = STATE["failures"].get(name, 0) + 1
        if len(STATE["failure_examples"]) < 10:
            STATE["failure_examples"].append(f"{request_type} {name}: {exception}"[:500])
        return
    window = STATE["window"]
    if name == "login" or (window is not None and window[0] <= time.monotonic() <= window[1]):
        STATE["samples"].setdefault(name, []).append(response_time)


@events.quitting.add_listener
def _on_quitting(environment, **kwargs) -> None:
    with open(CONFIG["result_path"], "w") as out:  # noqa: PTH123
        json.dump({**STATE, "window_s": CONFIG["duration_s"]}, out)


def _check(response, status: int, marker: str | None = None) -> None:
    if response.status_code != status:
        response.failure(f"answered {response.status_code}, expected {status}")
    elif marker is not None and marker not in response.text:
        response.failure(f"the answer lacks {marker!r}")
    else:
        response.success()


class LoggedIn(FastHttpUser):
    abstract = True

    def on_start(self) -> None:
        page = self.client.get("/accounts/login/", name="login form")
        token = CSRF.search(page.text or "")
        with self.client.post(
            "/accounts/login/",
            data={
                "login": next(ACCOUNT),
                "password": CONFIG["password"],
                "csrfmiddlewaretoken": token.group(1) if token else "",
            },
            name="login",
            allow_redirects=False,
            catch_response=True,
        ) as response:
            _check(response, 302)
        self._switch_project()
        STATE["logged_in"] += 1
        if STATE["logged_in"] == _logins_expected():
            _open_window(self.environment)

    def _switch_project(self) -> None:
        """Make the bench's project the current one (the switcher in the page's header), as a user
        of several projects does; until then the list shows the user's personal project."""
        page = self.client.get("/runs/", name="login form")
        token = CSRF.search(page.text or "")
        with self.client.post(
            "/projects/switch/",
            data={"project": CONFIG["project"], "csrfmiddlewaretoken": token.group(1) if token else ""},
            name="switch project",
            allow_redirects=False,
            catch_response=True,
        ) as response:
            _check(response, 302)


class ReportReader(LoggedIn):
    fixed_count = CONFIG["users"]["readers"]
    wait_time = constant(0)

    @task
    def report(self) -> None:
        with self.client.get(CONFIG["report_path"], name="report", catch_response=True) as response:
            _check(response, 200, CONFIG["report_sha256"])


class Browser(LoggedIn):
    fixed_count = CONFIG["users"]["browsers"]
    wait_time = between(0.5, 1.5)

    @task(2)
    def runs_list(self) -> None:
        with self.client.get("/runs/", name="runs list", catch_response=True) as response:
            _check(response, 200, CONFIG["target_name"])

    @task(1)
    def compare(self) -> None:
        with self.client.get(CONFIG["compare_path"], name="compare", catch_response=True) as response:
            _check(response, 200, CONFIG["runs"][4])


class ShareViewer(FastHttpUser):
    fixed_count = CONFIG["users"]["share_viewers"]
    wait_time = constant_pacing(1.0)

    @task
    def share_page(self) -> None:
        with self.client.get(CONFIG["share_path"], name="share view", catch_response=True) as response:
            _check(response, 200, CONFIG["report_sha256"])


class StatusPoller(FastHttpUser):
    fixed_count = CONFIG["users"]["pollers"]
    wait_time = constant_pacing(1.0)

    @task
    def status(self) -> None:
        with self.client.get(CONFIG["status_path"], name="status", catch_response=True) as response:
            _check(response, 200, '"terminal": true')


class WebhookSender(FastHttpUser):
    fixed_count = CONFIG["users"]["webhooks"]
    wait_time = constant_pacing(CONFIG["webhook_interval_s"])

    @task
    def deliver(self) -> None:
        body = json.dumps({"idempotency_key": f"load-{uuid.uuid4()}"}).encode()
        headers = {"Content-Type": "application/json"}
        headers |= webhooks.signed_headers(CONFIG["webhook_secret"], body, time.time())
        with self.client.post(
            CONFIG["webhook_path"], data=body, headers=headers, name="webhook", catch_response=True
        ) as response:
            _check(response, 202, '"status_url"')
