"""Drill: Redis (the broker and the cache) restarted in the middle of a run's second arm.

Redis has no persistence here, as a crashed Redis without AOF: the restart loses the queues, the
unacknowledged run message and the live progress. The run must still end succeeded with all three
arms, the portal must answer its progress JSON and the shared status.json from the database while
Redis is down, and the worker must consume the next run afterwards.
"""

from __future__ import annotations

import json
import time

from portal.runs.models import Run, RunReport
from portal.sharing.services import create_share
from tests.drills.runs import (
    PortalSession,
    arms_of,
    assert_succeeded_with,
    queue_run,
    wait_for_arms,
    wait_for_end,
    wait_for_status,
)

DOWN_S = 2.0  # how long Redis stays down (refused connections) before it starts again, empty


def test_a_run_survives_a_redis_restart_and_the_worker_takes_the_next_run(
    stack, private_redis, drill_owner, plain_server, tls_server
):
    stack.worker()
    stack.portal()
    browser = PortalSession(stack.base_url).login(drill_owner.username)
    run = queue_run(drill_owner, plain_server.url(), tls_server.url())
    _, token = create_share(drill_owner, run=run)
    began = time.monotonic()
    stack.dispatch(run)
    wait_for_arms(run, 1, timeout_s=40, stack=stack)  # the second arm is on now
    time.sleep(1.5)  # into its warm-up or measured window

    private_redis.stop()
    down_at = time.monotonic()
    # Without the cache the progress view answers from the database: no 500.
    progress = browser.progress(run)
    assert progress["status"] == "running" and progress["elapsed_s"] > 0, progress
    assert [arm["arm"] for arm in progress["series"]][:1] == ["plain"], progress
    assert progress["series"][0]["state"] == "measured" and progress["series"][0]["requests"]
    status, body = browser.get(f"/s/{token}/status.json")
    assert status == 200 and json.loads(body)["status"] == "running", body[:300]
    time.sleep(max(0.0, DOWN_S - (time.monotonic() - down_at)))
    private_redis.start()
    stack.check_alive("worker", "web")

    # Queued after the restart, while the first run still measures: taken once that one ends.
    second = queue_run(drill_owner, plain_server.url(), tls_server.url(), arms=["plain"], duration_s=2)
    stack.dispatch(second)

    run = wait_for_end(run, timeout_s=45, stack=stack)
    to_terminal_s = time.monotonic() - began
    arms = assert_succeeded_with(run, ["plain", "tls", "tls_new"])
    assert run.summary.get("headline"), run.summary  # summarised and its report stored at the end

    second = wait_for_status(second, Run.TERMINAL, timeout_s=30, stack=stack)
    assert second.status == Run.Status.SUCCEEDED, second.error
    assert [name for name, complete, _ in arms_of(second) if complete] == ["plain"]
    status, body = browser.get(f"/s/{token}/status.json")
    assert status == 200 and json.loads(body)["status"] == "succeeded"
    print(
        f"DRILL redis-restart: terminal {run.status} after {to_terminal_s:.1f} s from dispatch, "
        f"arms kept {len(arms)}/3, Redis down {DOWN_S:.0f} s, next run {second.status}"
    )


def test_a_run_that_ends_while_redis_is_down_keeps_its_verdict_and_report(
    stack, private_redis, drill_owner, plain_server, tls_server
):
    """Redis stopped during the last arm and still down when the run ends: the run is finished,
    summarised and its report stored (the cache is skipped), and the portal shows it from the
    database."""
    stack.worker()
    stack.portal()
    browser = PortalSession(stack.base_url).login(drill_owner.username)
    run = queue_run(drill_owner, plain_server.url(), tls_server.url(), arms=["plain", "tls"], duration_s=3)
    began = time.monotonic()
    stack.dispatch(run)
    wait_for_arms(run, 1, timeout_s=40, stack=stack)
    private_redis.stop()

    run = wait_for_end(run, timeout_s=30, stack=stack)
    to_terminal_s = time.monotonic() - began
    assert_succeeded_with(run, ["plain", "tls"])
    assert run.summary.get("headline") and RunReport.objects.filter(run=run).exists(), run.summary
    for path in (f"/runs/{run.code}/", f"/runs/{run.code}/report.json"):
        status, body = browser.get(path)
        assert status == 200, f"{path} while Redis is down: {status} {body[:300]!r}"
    assert browser.progress(run)["status"] == "succeeded"
    private_redis.start()
    print(f"DRILL redis-down-at-end: terminal {run.status} after {to_terminal_s:.1f} s, arms kept 2/2")
