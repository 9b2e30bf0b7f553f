"""The Locust user class of one arm.

Closed loop with no think time, and open loop, loop inside one Locust task: Locust's per-task
machinery (choosing the task, ``wait_time`` and its ``gevent.sleep(0)`` after every task) is paid
once per user, not once per request. A user still stops where Locust stops it (the runner kills
its greenlet at its next switch), so spawning, stopping, cancel and the window are as before; it
yields at least every ``YIELD_EVERY`` requests, so a server that always answers before the client
asks for the answer cannot starve the other users or the engine's one-second ticks. With think
time the task makes one request and Locust's ``constant`` wait does the thinking, as before.

On ``plain`` and ``tls`` in the closed loop without think time (HTTP/1.1 on a kept connection) a user
makes its requests itself only while it has no connection: once one is open it parks it with the
arm's single loop (``workers.engine.http.single_loop``), which sends its requests and reads their
answers without a greenlet switch per request, and finishes on the user's greenlet whatever the loop
hands back (anything but the plainest answer, every failure), so the client's own code decides retries,
reopenings and back-off as before.

After a connection-level failure (refused, reset, timed out) a user backs off before its next attempt
(``workers.engine.unreachable``: 5 ms doubling to 1 s, reset by any answer), so a dead target is not
hammered; the wait is outside every request's timing, and the open loop keeps its schedule.

On the ``h2``, ``h2c`` and ``h3`` arms a user runs ``h2_streams`` request loops (lanes) on its one client, so
up to that many of its requests are in flight on its connection at once: in the open loop they share
the user's one schedule (a request waits for a free lane, and the wait counts as lateness), in the
closed loop each lane sends as soon as it has its answer (lanes × users requests in flight).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import gevent
from locust import User, constant, task

from workers.engine.http import single_loop
from workers.engine.http.http1 import TimedClient
from workers.engine.http.sample import CONNECTION_ERRORS, Sample
from workers.engine.recording.recorder import ArmRecorder
from workers.engine.unreachable import backoff_s

YIELD_EVERY = 32


def _charge_lateness(sample: Sample, intended_ns: int) -> None:
    """Open loop: time from the intended send, so a late generator or a slow server is not hidden
    (no coordinated omission). The request is windowed by its intended start too."""
    late_us = max(0, (sample.start_ns - intended_ns) // 1000)
    sample.start_ns = min(sample.start_ns, intended_ns)
    sample.schedule_lag_us = late_us
    if sample.ttfb_us is not None:
        sample.ttfb_us += late_us
    if sample.ttlb_us is not None:
        sample.ttlb_us += late_us


class BackingOff(User):
    """A user that waits after consecutive connection failures (``back_off``)."""

    abstract = True
    backoff_s = 0.0  # the current wait; 0: the last attempt did not fail at the connection level

    def back_off(self, error: str | None) -> None:
        """After a request that failed or followed failures: wait longer after each consecutive
        connection failure, start afresh after anything else."""
        if error in CONNECTION_ERRORS:
            self.backoff_s = backoff_s(self.backoff_s)
            gevent.sleep(self.backoff_s)
        else:
            self.backoff_s = 0.0


def _loop(step: Callable[[], None]) -> None:
    """One lane: ``step`` again and again, yielding every ``YIELD_EVERY`` requests."""
    while True:
        for _ in range(YIELD_EVERY):
            step()
        gevent.sleep(0)


def _kept(user, driver: single_loop.SingleLoop) -> None:
    """The closed loop on a kept HTTP/1.1 connection: the user's own request while it has no
    connection (opening one, backing off), else the single loop's; what the loop hands back is
    finished here by the client's own code."""
    timed = user.timed
    while True:
        if timed.sock is None:
            user.one()
            continue
        user.settle(timed.finish(*driver.drive(timed)))


def arm_user_class(
    name: str,
    new_client: Callable[[], TimedClient],
    pick: Callable[[], str],
    recorder: ArmRecorder,
    expected: Callable[[int], bool],
    interval_ns: int,
    think_time_s: float,
    lanes: int = 1,
) -> type[User]:
    """A User class whose users each own a TimedClient (``new_client()``) and send ``pick()``'s
    path, their requests recorded by the arm's ``recorder``; ``interval_ns`` > 0: open loop, one
    request per user every ``interval_ns``; ``lanes``: request loops per user (HTTP/2 streams,
    module docstring)."""
    loop = bool(interval_ns) or not think_time_s
    record = recorder.record

    class ArmUser(BackingOff):
        wait_time = constant(0 if loop else think_time_s)
        # The arm's single loop (``http.single_loop``), made by its first user when it applies.
        single_loop: single_loop.SingleLoop | None = None

        def on_start(self) -> None:
            self.timed = new_client()
            # A random phase, so users spawned together do not fire in lockstep.
            self.next_ns = time.perf_counter_ns() + int(random.random() * interval_ns)  # noqa: S311

        def on_stop(self) -> None:
            gevent.killall(getattr(self, "extra_lanes", []))
            self.timed.close()

        def settle(self, sample: Sample) -> None:
            """A request done: recorded (its status judged), then backed off after a failure."""
            record(sample, sample.status is not None and expected(sample.status))
            if sample.error is not None or self.backoff_s:
                self.back_off(sample.error)

        def one(self) -> None:
            path = pick()
            self.settle(self.timed.request(path, path))

        def paced(self) -> None:
            path = pick()
            intended = self.next_ns
            self.next_ns += interval_ns
            wait_ns = intended - time.perf_counter_ns()
            if wait_ns > 0:
                gevent.sleep(wait_ns / 1e9)
            sample = self.timed.request(path, path)
            _charge_lateness(sample, intended)
            self.settle(sample)

        @task
        def requests(self) -> None:
            if not loop:
                self.one()
                return
            if single_loop.applies(self.timed, interval_ns, think_time_s, lanes):
                cls = type(self)
                if cls.single_loop is None:
                    cls.single_loop = single_loop.SingleLoop(
                        pick, recorder.record_answer, expected, self.timed.timeout_s
                    )
                _kept(self, cls.single_loop)
            step = self.paced if interval_ns else self.one
            self.extra_lanes = [gevent.spawn(_loop, step) for _ in range(lanes - 1)]
            _loop(step)

    ArmUser.__name__ = "ArmUser_" + "".join(c if c.isalnum() else "_" for c in name)
    return ArmUser
