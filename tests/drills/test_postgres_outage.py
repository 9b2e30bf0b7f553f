"""Drill: PostgreSQL unavailable for 10 s in the middle of a run.

The private cluster is shut down (clients disconnected, new connections refused) while the run's
second arm is measured and started again 10 s later. The engine keeps measuring; the executor keeps
the arm that ends during the outage in memory and writes it once the database answers
(workers/storage.py); heartbeats missed meanwhile stay below the reaper's silence. The run must end
succeeded with every arm, the one finished before the outage byte for byte.
"""

from __future__ import annotations

import time

from django.db import close_old_connections

from portal.runs.models import ArmResult, Run
from tests.drills.runs import queue_run, wait_for_arms, wait_for_end

DOWN_S = 10.0


def _arms(run: Run) -> dict[str, tuple]:
    close_old_connections()
    return {
        f"{a.arm}#{a.round}": (a.ttlb_hist, a.ttfb_hist, a.requests, a.series, a.complete)
        for a in ArmResult.objects.filter(run=run)
    }


def test_a_run_outlasts_postgresql_down_for_10_s(
    stack, private_postgres, drill_owner, plain_server, tls_server
):
    stack.worker()
    # 3 arms × (1 s + 6 s): the second ends while the database is down.
    run = queue_run(drill_owner, plain_server.url(), tls_server.url(), duration_s=6)
    began = time.monotonic()
    stack.dispatch(run)
    wait_for_arms(run, 1, timeout_s=40, stack=stack)
    before = _arms(run)
    time.sleep(1.0)  # into the second arm

    private_postgres.stop("fast")
    down_at = time.monotonic()
    time.sleep(DOWN_S)
    private_postgres.start()
    up_s = time.monotonic() - down_at
    stack.check_alive("worker")

    run = wait_for_end(run, timeout_s=60, stack=stack)
    to_terminal_s = time.monotonic() - began
    assert run.status == Run.Status.SUCCEEDED, run.error
    after = _arms(run)
    assert sorted(after) == ["plain#0", "tls#0", "tls_new#0"]
    assert all(row[-1] and row[2] > 0 for row in after.values()), after
    assert {key: after[key] for key in before} == before  # byte for byte
    assert [a.outcome for a in run.attempts.all()] == ["succeeded"]  # never taken for lost
    log = stack["worker"].log_tail(200000)
    assert "kept until the database answers" in log  # the second arm really waited in memory
    print(
        f"DRILL postgres down {up_s:.1f} s: succeeded {to_terminal_s:.1f} s after dispatch, "
        f"{len(after)}/3 arms kept"
    )
