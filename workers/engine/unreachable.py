"""A target that stops answering is not hammered (issue 16).

Two rules, both about *connection-level* failures only (refused, reset, timed out, a network error:
``http.sample.CONNECTION_ERRORS``), never about HTTP statuses, TLS or protocol errors:

* per user (``workers.engine.users``): after each consecutive connection failure the user waits
  ``backoff_s(n)`` (5 ms, doubling, at most 1 s) before its next attempt; any answer resets it. A
  successful request is timed exactly as before: the wait comes after a failure, never inside a
  request, and in the open loop the schedule is kept (a request sent late is charged from its
  intended start, as always).
* per arm (``Watch``): when in each second of the last ``STOP_AFTER_S`` seconds that had attempts at
  least ``FAILED_SHARE`` of them failed at the connection level (and there were at least
  ``MIN_ATTEMPTS``), warm-up and window alike, the arm stops early: its result is still sent
  (``complete: false``, ``stopped``: the reason) and then an ``arm_error`` with the same reason
  ends the run (docs/engine-protocol.md).

Django- and Locust-free: the master of a distributed run feeds a ``Watch`` from its workers' counts.
"""

from __future__ import annotations

import time
from collections import Counter, deque

LABELS = {
    "connection_refused": "connection refused",
    "connection_reset": "connection reset",
    "timeout": "timed out",
    "os_error": "network error",
}
BACKOFF_FIRST_S = 0.005
BACKOFF_MAX_S = 1.0
STOP_AFTER_S = 3.0
FAILED_SHARE = 0.9
MIN_ATTEMPTS = 3
PREFIX = "target unreachable"


def backoff_s(previous_s: float) -> float:
    """The wait after one more consecutive connection failure, given the previous wait (0: none)."""
    return min(BACKOFF_MAX_S, previous_s * 2 or BACKOFF_FIRST_S)


class TargetUnreachable(Exception):
    """An arm was stopped by the rule; its result has been sent, the run ends with ``arm_error``."""

    def __init__(self, arm: str, reason: str) -> None:
        super().__init__(reason)
        self.arm = arm
        self.reason = reason


class Watch:
    """The arm-level rule over one-second ticks. ``tick`` is called about once a second (the last
    warm-up tick may be shorter) with the attempts and the connection failures by kind since the
    previous tick; it returns the reason to stop, or None. ``tick_recorder`` reads them from an
    ``ArmRecorder``'s running totals."""

    def __init__(self) -> None:
        self.ticks: deque[tuple[float, int, dict[str, int]]] = deque(maxlen=64)
        self.last_t = time.monotonic()
        self._recorder = None
        self._seen: tuple[int, dict[str, int]] = (0, {})

    def restart(self) -> None:
        """A new stage or arm begins now: the pause before it is not a tick."""
        self.last_t = time.monotonic()

    def tick_recorder(self, recorder) -> str | None:
        if recorder is not self._recorder:
            self._recorder, self._seen = recorder, (0, {})
        attempts, failures = recorder.warmup_requests + recorder.requests, dict(recorder.connection_failures)
        seen_attempts, seen_failures = self._seen
        self._seen = (attempts, failures)
        return self.tick(
            attempts - seen_attempts, {kind: n - seen_failures.get(kind, 0) for kind, n in failures.items()}
        )

    def tick(self, attempts: int, failures: dict[str, int]) -> str | None:
        now = time.monotonic()
        self.ticks.append((now - self.last_t, attempts, {k: n for k, n in failures.items() if n > 0}))
        self.last_t = now
        span_s, total, failed = 0.0, 0, Counter()
        for duration_s, count, kinds in reversed(self.ticks):
            if count and min(sum(kinds.values()), count) < FAILED_SHARE * count:
                return None  # a second that mostly got answers
            span_s += duration_s
            total += count
            failed.update(kinds)
            if span_s >= STOP_AFTER_S - 0.05:
                break
        else:
            return None  # not yet that long
        n_failed = min(sum(failed.values()), total)
        if total < MIN_ATTEMPTS or n_failed < FAILED_SHARE * total:
            return None
        kind = failed.most_common(1)[0][0]
        return (
            f"{PREFIX}: {100 * n_failed / total:.0f}% of {total:,} attempts failed in the last "
            f"{round(span_s):.0f} s ({LABELS.get(kind, kind)})"
        )
