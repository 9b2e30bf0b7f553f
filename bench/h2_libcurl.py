"""What a compiled HTTP/2 client costs per request here, driven from Python under gevent: the route
issue 35's HTTP/2 target points at (docs/performance.md, "A compiled HTTP/2 client, measured").

libcurl (with nghttp2: HPACK, framing, flow control and stream states in C) through ``pycurl``, one
``CurlMulti`` per user, so one connection per user and one stream at a time, as the engine's ``h2`` arm
and ``h2load -m1``. Each multi is driven by its socket API on the gevent hub (one libev watcher per
socket and interest, kept for the user's life; the user's greenlet sleeps on the hub while libcurl
waits): ``--loop hub``, the engine's shape; or one multi serves every user in libcurl's own loop
(``perform`` and ``select``): ``--loop curl``. Each request becomes the engine's ``Sample`` (its
status, body size, TTFB and TTLB on libcurl's own µs clock from the request about to be sent,
``PRETRANSFER``) recorded by the engine's ``ArmRecorder``, which counts the requests *sent* in the
window, as the engine does. TLS is libcurl's own OpenSSL (the wheel's): neither of the engine's TLS
libraries.

It is a probe, not a client of the product: no GOAWAY handling, no preflight, no matrix variants.

    .venv/bin/python -m bench.h2_libcurl https://127.0.0.1:PORT/1k [--users 8] [--warmup 1] [--duration 5]

prints the measured window's start and end as they come (``{"window": "start"}``, then ``"end"``:
the bench counts nginx's sleeps between them), then one JSON object: the window's requests,
failures and CPU (user + system of this process, every thread, from ``getrusage``, and each apart),
requests per CPU-second, the negotiated HTTP versions, TTFB/TTLB medians in µs and libcurl's
version. Exit 0 when every request was answered over HTTP/2 with a 2xx, else 1. Load goes where the
URL says (the bench gives it a loopback nginx), bounded in seconds.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import resource
import sys
import time
import urllib.parse

import gevent
import pycurl
from gevent import get_hub, getcurrent

from workers.engine.http.sample import Sample
from workers.engine.recording.recorder import ArmRecorder

WAIT_LIMIT_S = 10.0  # a wait longer than this is a failure (the engine's default timeout)
# libcurl's interest in a socket -> libev's events, and libev's -> libcurl's socket_action mask.
_INTEREST = {pycurl.POLL_IN: 1, pycurl.POLL_OUT: 2, pycurl.POLL_INOUT: 3}
_ACTION = {1: pycurl.CSELECT_IN, 2: pycurl.CSELECT_OUT, 3: pycurl.CSELECT_IN | pycurl.CSELECT_OUT}
_TIMER = -1  # what a woken wait says when libcurl's own timer, not a socket, woke it


class Failed(Exception):
    pass


def _easy(url: str) -> pycurl.Curl:
    """One user's transfer: a GET of ``url`` over HTTP/2 (ALPN h2 over TLS), reused for every request."""
    easy = pycurl.Curl()
    easy.setopt(pycurl.URL, url)
    easy.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS)
    easy.setopt(pycurl.SSL_VERIFYPEER, 0)  # the bench's nginx has a throwaway self-signed cert
    easy.setopt(pycurl.SSL_VERIFYHOST, 0)
    easy.setopt(pycurl.WRITEFUNCTION, len)  # the body read and dropped; its size from SIZE_DOWNLOAD_T
    return easy


class User:
    """One user: one multi handle, one easy handle reused for every request (its connection kept)."""

    def __init__(self, url: str) -> None:
        self.hub = get_hub()
        self.multi = multi = pycurl.CurlMulti()
        multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 1)
        multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self.easy = _easy(url)
        self.active: dict[int, object] = {}  # fd -> the watcher of libcurl's current interest
        self.watchers: dict[tuple[int, int], object] = {}  # (fd, events) -> watcher, kept
        self.timer_due: float | None = None  # when libcurl's timer is due (monotonic s), if it set one
        self.limit = self.hub.loop.timer(WAIT_LIMIT_S, WAIT_LIMIT_S)  # armed afresh per wait (``again``)
        self.waiting = None

    def _on_socket(self, what: int, fd: int, multi, socketp) -> None:
        old = self.active.pop(fd, None)
        if old is not None:
            old.stop()
        if what == pycurl.POLL_REMOVE:
            return
        events = _INTEREST[what]
        watcher = self.watchers.get((fd, events))
        if watcher is None:
            watcher = self.watchers[(fd, events)] = self.hub.loop.io(fd, events)
        self.active[fd] = watcher
        if self.waiting is not None:
            watcher.start(self._wake, fd, events)

    def _on_timer(self, ms: int) -> None:
        self.timer_due = None if ms < 0 else time.monotonic() + ms / 1000

    def _wake(self, fd: int, events: int) -> None:
        self.waiting.switch((fd, events))

    def _wait(self) -> tuple[int, int]:
        """Sleep on the hub until a socket libcurl watches is ready or its timer is due."""
        self.waiting = getcurrent()
        for fd, watcher in self.active.items():
            watcher.start(self._wake, fd, watcher.events & 3)
        due = None
        if self.timer_due is not None:
            due = self.hub.loop.timer(max(0.0, self.timer_due - time.monotonic()))
            due.start(self._wake, _TIMER, 0)
        self.limit.again(self._wake, None, 0)
        try:
            fd, events = self.hub.switch()
        finally:
            self.limit.stop()
            if due is not None:
                due.stop()
            for watcher in self.active.values():
                watcher.stop()
            self.waiting = None
        if fd is None:
            raise Failed(f"no answer within {WAIT_LIMIT_S} s")
        return fd, events

    def request(self) -> int:
        """One GET, read whole: its start on ``perf_counter_ns`` (``Tally.answered`` reads the rest
        from the handle). ``Failed`` on a transfer error or a wait over ``WAIT_LIMIT_S``."""
        multi, easy = self.multi, self.easy
        start_ns = time.perf_counter_ns()
        multi.add_handle(easy)
        try:
            running = 1
            while running:
                due = self.timer_due
                if due is not None and due <= time.monotonic():
                    self.timer_due = None
                    _, running = multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                    continue
                fd, events = self._wait()
                if fd == _TIMER:
                    self.timer_due = None
                    _, running = multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                else:
                    _, running = multi.socket_action(fd, _ACTION[events])
            _, _, failed = multi.info_read()
        except pycurl.error as exc:
            raise Failed(f"libcurl: {exc}") from None
        finally:
            multi.remove_handle(easy)
        if failed:
            raise Failed(f"libcurl error {failed[0][1]}: {failed[0][2]}")
        return start_ns


class Tally:
    """The requests through the engine's ``ArmRecorder`` (its window: requests sent in it), the HTTP
    versions seen, the first failures' reasons."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.recorder = ArmRecorder("h2")
        self.errors: list[str] = []
        self.versions: set[int] = set()

    def answered(self, easy, start_ns: int) -> None:
        """A finished transfer of ``easy``, begun at ``start_ns``: the engine's ``Sample`` of it
        recorded (libcurl's µs since the transfer began; TTFB and TTLB from ``PRETRANSFER``)."""
        self.versions.add(easy.getinfo(pycurl.INFO_HTTP_VERSION))
        sent = easy.getinfo(pycurl.PRETRANSFER_TIME_T)
        last = easy.getinfo(pycurl.TOTAL_TIME_T)
        sample = Sample(self.url, start_ns)
        sample.end_ns = start_ns + last * 1000
        sample.status = status = easy.getinfo(pycurl.RESPONSE_CODE)
        sample.body_bytes = easy.getinfo(pycurl.SIZE_DOWNLOAD_T)
        sample.ttfb_us = max(1, easy.getinfo(pycurl.STARTTRANSFER_TIME_T) - sent)
        sample.ttlb_us = max(1, last - sent)
        self.recorder.record(sample, 200 <= status < 300)

    def failed(self, why: str) -> None:
        """A request that got no answer: a failure of the window when it is open."""
        sample = Sample(self.url, time.perf_counter_ns())
        sample.error, sample.error_detail = "libcurl", why[:200]
        self.recorder.record(sample, False)
        if self.recorder.measuring and len(self.errors) < 3:
            self.errors.append(why[:200])

    def start(self) -> resource.struct_rusage:
        self.recorder.start_window()
        _mark("start")
        return resource.getrusage(resource.RUSAGE_SELF)

    def end(self, before: resource.struct_rusage) -> dict:
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.recorder.close_window()
        _mark("end")
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        recorder = self.recorder
        requests = recorder.requests
        answered = requests - sum(entry["count"] for entry in recorder.errors.values())
        return {
            "requests": requests,
            "failures": recorder.failures,
            "errors": list(self.errors),
            "cpu_s": round(cpu_s, 3),
            "user_s": round(after.ru_utime - before.ru_utime, 3),
            "system_s": round(after.ru_stime - before.ru_stime, 3),
            "per_cpu_s": round(requests / cpu_s, 1) if cpu_s > 0 and requests else None,
            "http_versions": sorted(_version(v) for v in self.versions),
            "ttfb_p50_us": recorder.ttfb.get_value_at_percentile(50) if answered else None,
            "ttlb_p50_us": recorder.ttlb.get_value_at_percentile(50) if answered else None,
            "libcurl": pycurl.version,
        }


_VERSIONS = {
    pycurl.CURL_HTTP_VERSION_1_0: "1.0",
    pycurl.CURL_HTTP_VERSION_1_1: "1.1",
    pycurl.CURL_HTTP_VERSION_2_0: "2",
}


def _version(code: int) -> str:
    """The HTTP version libcurl used for a transfer, as said in a report ("2": HTTP/2)."""
    return _VERSIONS.get(code, f"libcurl's code {code}")


def _mark(window: str) -> None:
    """The measured window's start or end, told at once (the bench counts nginx's sleeps over it)."""
    print(json.dumps({"window": window}), flush=True)


def on_hub(url: str, users: int, warmup_s: float, duration_s: float) -> dict:
    """The engine's shape: a greenlet per user, each with its own multi on the gevent hub."""
    tally, stop = Tally(url), [False]

    def loop() -> None:
        user = User(url)
        while not stop[0]:
            try:
                start_ns = user.request()
            except Failed as exc:
                tally.failed(str(exc))
                gevent.sleep(0.01)  # a failed attempt is not retried at once
                continue
            tally.answered(user.easy, start_ns)

    greenlets = [gevent.spawn(loop) for _ in range(users)]
    gevent.sleep(warmup_s)
    before = tally.start()
    gevent.sleep(duration_s)
    figures = tally.end(before)
    stop[0] = True
    gevent.joinall(greenlets, timeout=WAIT_LIMIT_S + 1)
    died = [greenlet.exception for greenlet in greenlets if greenlet.exception is not None]
    if died:  # a user whose loop broke: the run measured fewer users than it says
        figures["failures"] += len(died)
        figures["errors"].append(f"{len(died)} user(s) ended by {type(died[0]).__name__}: {died[0]}"[:200])
    return figures


def in_curl_loop(url: str, users: int, warmup_s: float, duration_s: float) -> dict:
    """libcurl's own shape: one multi for every user, driven by ``perform`` and ``select`` (bounded by
    libcurl's own timeout); no multiplexing, so one connection per user (``users`` transfers, each
    added again when it ends)."""
    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_PIPELINING, 0)
    multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, users)
    tally = Tally(url)
    started: dict[pycurl.Curl, int] = {}  # each transfer's start on perf_counter_ns

    def again(easy: pycurl.Curl) -> None:
        multi.remove_handle(easy)
        started[easy] = time.perf_counter_ns()
        multi.add_handle(easy)

    for _ in range(users):
        easy = _easy(url)
        started[easy] = time.perf_counter_ns()
        multi.add_handle(easy)
    clock = time.monotonic
    ends, before = clock() + warmup_s, None
    while True:
        if clock() >= ends:
            if before is not None:
                return tally.end(before)
            before, ends = tally.start(), clock() + duration_s
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, done, failed = multi.info_read()
        for easy in done:
            tally.answered(easy, started[easy])
            again(easy)
        for easy, code, message in failed:
            tally.failed(f"libcurl error {code}: {message}")
            again(easy)
        if failed:
            time.sleep(0.01)  # a failed attempt is not retried at once
        elif not done:
            due_ms = multi.timeout()
            multi.select(WAIT_LIMIT_S if due_ms < 0 else min(due_ms / 1000, WAIT_LIMIT_S))


LOOPS = {"hub": on_hub, "curl": in_curl_loop}


def loopback_url(text: str) -> str:
    """``text`` if it is an https:// URL whose host is a loopback address (the probe loads no other)."""
    parts = urllib.parse.urlsplit(text)
    try:
        loopback = ipaddress.ip_address(parts.hostname or "").is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "https" or not loopback:
        raise argparse.ArgumentTypeError(f"{text!r}: an https:// URL on 127.0.0.0/8 or ::1 only")
    return text


def _bounded(kind: type, low: float, high: float):
    """An argument of ``kind`` from ``low`` to ``high``, or a clear refusal."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is outside {low}-{high}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", type=loopback_url, help="an https:// URL on 127.0.0.0/8 or ::1")
    parser.add_argument("--loop", choices=sorted(LOOPS), default="hub", help="whose loop drives libcurl")
    parser.add_argument("--users", type=_bounded(int, 1, 1000), default=8, help="1-1000")
    parser.add_argument("--warmup", type=_bounded(float, 0, 60), default=1.0, help="s, 0-60")
    parser.add_argument("--duration", type=_bounded(float, 0.1, 300), default=5.0, help="measured s, 0.1-300")
    args = parser.parse_args(argv)
    figures = LOOPS[args.loop](args.url, args.users, args.warmup, args.duration)
    print(json.dumps({"loop": args.loop, "users": args.users, **figures}, separators=(",", ":")))
    fine = figures["requests"] > 0 and figures["failures"] == 0 and figures["http_versions"] == ["2"]
    return 0 if fine else 1


if __name__ == "__main__":
    sys.exit(main())
