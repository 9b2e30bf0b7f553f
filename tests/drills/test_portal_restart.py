"""Drill: the portal's Gunicorn killed (-9) and started again on the same port during a run.

The run page polls the progress JSON with the browser's session cookie. The web process holds
nothing a run needs (the worker measures, the database and the cache keep the state), so after
the restart the same session gets the same run's progress, further along, and the run ends
succeeded.
"""

from __future__ import annotations

import time

from tests.drills.runs import PortalSession, assert_succeeded_with, queue_run, wait_for_end, wait_until


def test_live_progress_resumes_after_the_portal_restarts(stack, drill_owner, plain_server, tls_server):
    stack.worker()
    stack.portal()
    browser = PortalSession(stack.base_url).login(drill_owner.username)
    run = queue_run(drill_owner, plain_server.url(), tls_server.url())
    began = time.monotonic()
    stack.dispatch(run)

    def in_second_arm():
        now = browser.progress(run)
        return now if len(now.get("arms_done", [])) == 1 and now.get("phase") else None

    before = wait_until(in_second_arm, "progress of the second arm", timeout_s=40, stack=stack)
    restart_s = stack.restart_web()
    # The same session, logged in still (sessions live in the database); the engine's next progress
    # message (about one a second) moves elapsed on.
    after = wait_until(
        lambda: (now := browser.progress(run))["elapsed_s"] > before["elapsed_s"] and now,
        "progress moving on after the restart",
        timeout_s=10,
        stack=stack,
    )
    assert after["status"] == "running", after
    assert after["arms_done"][:1] == before["arms_done"] == ["plain"], (before, after)

    # An arm's end is its own message and may carry the elapsed of the last tick: wait for the tick after.
    def in_third_arm():
        now = browser.progress(run)
        return now if len(now.get("arms_done", [])) >= 2 and now["elapsed_s"] > after["elapsed_s"] else None

    later = wait_until(in_third_arm, "progress of the third arm", timeout_s=30, stack=stack)
    assert later["elapsed_s"] > after["elapsed_s"] and later["arms_done"] == ["plain", "tls"], later

    run = wait_for_end(run, timeout_s=30, stack=stack)
    to_terminal_s = time.monotonic() - began
    arms = assert_succeeded_with(run, ["plain", "tls", "tls_new"])
    assert browser.progress(run)["status"] == "succeeded"
    print(
        f"DRILL portal-restart: terminal {run.status} after {to_terminal_s:.1f} s from dispatch, "
        f"arms kept {len(arms)}/3, Gunicorn answered again {restart_s:.1f} s after kill -9"
    )
