"""``bench/generator``'s overhead part: the engine subprocess at 1 user and a blocking reference client
taking turns, so that both are measured over the same seconds.

The engine runs as the product runs it (``python -m workers.engine``, ``plain_new`` then ``tls_new``,
1 user, closed loop). From its arm's first progress tick to the arm's end the bench takes turns with
it in slices of ``SLICE_S``: the engine runs a slice, then is paused (``SIGSTOP`` through a pidfd,
waited for until it has stopped) while the blocking reference (``bench/blocking.py``, in this
process, on the same TLS library) sends the same arm's requests for a slice, then the engine is
resumed (``SIGCONT``). The reference's samples count only inside the engine's measured window (from
its last warm-up tick to its arm's end, as the engine's own window).

Why turns: on a VM whose TLS handshake time drifts by ±15 % over minutes (docs/accuracy.md) a
reference measured before and after the engine's window split the two clients by minutes as much as
by code; a drift of the machine between them read as the engine's overhead (2026-11-27: +15 % on the
system library in two quiet runs, with the engine's work per connection unchanged: docs/performance.md).
The paused engine's request in flight at each pause comes out long (one in about 80 for ``tls_new``,
one in about 600 for ``plain_new`` at 0.2 s slices): it can only make the engine look slower, never
hide an overhead.

Each arm and phase (connect, TTLB) gets both medians, their 95 % intervals and the verdict of
``bench/bound.py`` (``within_bound``: true, false, or null when it could not judge).
"""

from __future__ import annotations

import contextlib
import os
import signal
import statistics
import threading
import time

from bench import bound
from bench.blocking import BundledReference, blocking_context, blocking_request, request_head

SLICE_S = 0.2  # each client's turn
WARMUP_REQUESTS = 20  # the reference's first requests per arm, before the engine starts: not counted
ARMS = ("plain_new", "tls_new")
PHASES = ("connect_us", "ttlb_us")


class Reference:
    """The blocking reference client for one arm: (time sent, connect µs, TTLB µs) per request."""

    def __init__(self, port: int, tls: bool, library: str, path: str) -> None:
        self.port = port
        self.context = (BundledReference() if library == "bundled" else blocking_context()) if tls else None
        self.head = request_head(port, path)
        self.samples: list[tuple[float, int, int]] = []

    def one(self) -> tuple[int, int]:
        return blocking_request(self.port, self.context, self.head, time.perf_counter_ns)

    def warm_up(self) -> None:
        for _ in range(WARMUP_REQUESTS):
            self.one()

    def run_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (now := time.monotonic()) < deadline:
            connect_us, ttlb_us = self.one()
            self.samples.append((now, connect_us, ttlb_us))

    def window(self, start: float, end: float) -> dict[str, list[int]]:
        """Its samples sent inside [start, end] (the engine's measured window), per phase."""
        kept = [s for s in self.samples if start <= s[0] <= end]
        return {"connect_us": [s[1] for s in kept], "ttlb_us": [s[2] for s in kept]}


class Paused:
    """Pauses and resumes one child process through a pidfd (a signal never reaches a recycled pid)."""

    def __init__(self, pid: int) -> None:
        self.fd = os.pidfd_open(pid)

    def close(self) -> None:
        os.close(self.fd)

    @contextlib.contextmanager
    def pause(self):
        """Stopped for the block; yields False (and pauses nothing) when the process has ended."""
        try:
            signal.pidfd_send_signal(self.fd, signal.SIGSTOP)
            # WNOWAIT: the state is only looked at; the engine's own reader still reaps the exit.
            info = os.waitid(os.P_PIDFD, self.fd, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
            stopped = info is not None and info.si_code == os.CLD_STOPPED
        except (ProcessLookupError, ChildProcessError):
            stopped = False
        try:
            yield stopped
        finally:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.fd, signal.SIGCONT)


def take_turns(engine, references: dict[str, Reference]) -> None:
    """Read ``engine`` (a ``bench/generator`` Engine) to its end while taking turns with it on the arm
    it is measuring (``engine.arm_now``); its errors are raised here."""
    errors: list[BaseException] = []

    def read() -> None:
        try:
            engine.read()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            errors.append(exc)

    paused = Paused(engine.proc.pid)
    reader = threading.Thread(target=read, name="engine-reader", daemon=True)
    reader.start()
    try:
        while reader.is_alive():
            arm = engine.arm_now
            if arm not in references:
                reader.join(0.01)
                continue
            reader.join(SLICE_S)  # the engine's turn
            if engine.arm_now != arm:
                continue
            with paused.pause() as stopped:
                if stopped:
                    references[arm].run_for(SLICE_S)
        reader.join()
    finally:
        paused.close()
    if errors:
        raise errors[0]


def _p50_interval(hist) -> tuple[float, tuple[float, float] | None]:
    return float(hist.get_value_at_percentile(50)), bound.histogram_median_interval(hist)


def compare(engine_hists: dict, reference: dict[str, list[int]]) -> dict:
    """One arm's row: per phase the engine's and the reference's medians, ratio, and the verdict."""
    row: dict = {"engine": {}, "blocking": {}, "blocking_requests": len(reference["ttlb_us"])}
    for phase in PHASES:
        hist, mine = engine_hists[phase], reference[phase]
        engine_p50, engine_ci = _p50_interval(hist)
        if not mine:  # the engine ended before the reference had a turn in its window: nothing to judge
            row["engine"][phase], row["blocking"][phase] = engine_p50, None
            row[phase] = dict.fromkeys(("ratio", "extra_us", "allowed_us", "extra_ci95_us", "within_bound"))
            continue
        theirs = statistics.median(mine)
        row["engine"][phase], row["blocking"][phase] = engine_p50, theirs
        judged = bound.judge_two(engine_p50, engine_ci, theirs, bound.median_interval(mine))
        row[phase] = {"ratio": round(engine_p50 / theirs, 3) if theirs else None, **judged}
    row["within_bound"] = bound.overall(row[phase]["within_bound"] for phase in PHASES)
    return row


def majority(verdicts: list[bool | None]) -> bool | None:
    """Over ``--repeat`` runs: over when more than half the runs were over, within when more than half
    were within, else not judged (one noisy run does not decide, nor does a split)."""
    half = len(verdicts) / 2
    if verdicts.count(False) > half:
        return False
    if verdicts.count(True) > half:
        return True
    return None


def _median_of(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def summarize(runs: list[dict], arms: tuple[str, ...]) -> dict:
    """Per library, arm and phase over the runs: the medians of the runs' medians and ratios, how many
    runs were within, over or not judged, and the majority's verdict (``majority``)."""
    out: dict = {}
    for library in dict.fromkeys(run["tls_library"] for run in runs):
        mine = [run for run in runs if run["tls_library"] == library]
        summary: dict = {}
        for arm in arms:
            for phase in PHASES:
                verdicts = [run[arm][phase]["within_bound"] for run in mine]
                summary.setdefault(arm, {})[phase] = {
                    "engine_p50": _median_of([run[arm]["engine"][phase] for run in mine]),
                    "blocking_p50": _median_of([run[arm]["blocking"][phase] for run in mine]),
                    "ratio": _median_of([run[arm][phase]["ratio"] for run in mine]),
                    "runs": {
                        "within": verdicts.count(True),
                        "over": verdicts.count(False),
                        "not_judged": verdicts.count(None),
                    },
                    "within_bound": majority(verdicts),
                }
        summary["within_bound"] = bound.overall(
            summary[arm][phase]["within_bound"] for arm in arms for phase in PHASES
        )
        out[library] = summary
    return out


def _interval_text(interval: list[float] | None) -> str:
    return f"{interval[0]:+,.0f}…{interval[1]:+,.0f}" if interval else "n/a (too few samples)"


def row_lines(rows: dict) -> list[str]:
    """One run's arms, a line per phase: medians, ratio, the extra with its interval, the verdict."""
    lines = []
    for arm in ARMS:
        for phase in PHASES:
            r, engine, blocking = rows[arm][phase], rows[arm]["engine"][phase], rows[arm]["blocking"][phase]
            theirs = "none" if blocking is None else f"{blocking:,.0f}"
            if blocking is None:
                lines.append(
                    f"  {arm:9} {phase:10}: {engine:>7,.0f} / {theirs:>7} µs  not judged (no reference)"
                )
                continue
            lines.append(
                f"  {arm:9} {phase:10}: {engine:>7,.0f} / {theirs:>7} µs  ratio {r['ratio']}"
                f"  extra {r['extra_us']:+,.0f} µs (95 % CI {_interval_text(r['extra_ci95_us'])},"
                f" allowed {r['allowed_us']:,.0f})  {bound.said(r['within_bound'])}"
            )
    return lines


def summary_lines(summary: dict) -> list[str]:
    """``--repeat``: per library, arm and phase, the medians over the runs and the majority's verdict."""
    lines = []
    for library, arms in summary.items():
        lines.append(f" TLS library {library}, over the runs: {bound.said(arms['within_bound'])}")
        for arm in ARMS:
            for phase in PHASES:
                r = arms[arm][phase]
                runs = r["runs"]
                lines.append(
                    f"  {arm:9} {phase:10}: median {r['engine_p50']:,.0f} / {r['blocking_p50'] or 0:,.0f} µs"
                    f"  ratio {r['ratio']}  runs within {runs['within']}, over {runs['over']},"
                    f" not judged {runs['not_judged']}  {bound.said(r['within_bound'])}"
                )
    return lines
