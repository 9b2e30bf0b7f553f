"""What a compiled HTTP/2 client costs per request here, driven from Python under gevent: the route
issue 35's HTTP/2 target points at (docs/performance.md, "A compiled HTTP/2 client, measured").

libcurl (with nghttp2: HPACK, framing, flow control and stream states in C) through ``pycurl``, one
``CurlMulti`` per user, so one connection per user and one stream at a time, as the engine's ``h2`` arm
and ``h2load -m1``. Each multi is driven by its socket API on the gevent hub (one libev watcher per
socket and interest, kept for the connection's life; the user's greenlet sleeps on the hub while
libcurl waits), and each request's status, TTFB and TTLB (libcurl's own µs clock, from the request
about to be sent: ``PRETRANSFER``) are read and recorded in HDR histograms, as the engine records its
samples. TLS is libcurl's own OpenSSL (the wheel's): neither of the engine's TLS libraries.

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
import json
import resource
import sys
import time

import gevent
import pycurl
from gevent import get_hub, getcurrent
from hdrh.histogram import HdrHistogram

WAIT_LIMIT_S = 10.0  # a wait longer than this is a failure (the engine's default timeout)
# libcurl's interest in a socket -> libev's events, and libev's -> libcurl's socket_action mask.
_INTEREST = {pycurl.POLL_IN: 1, pycurl.POLL_OUT: 2, pycurl.POLL_INOUT: 3}
_ACTION = {1: pycurl.CSELECT_IN, 2: pycurl.CSELECT_OUT, 3: pycurl.CSELECT_IN | pycurl.CSELECT_OUT}
_TIMER = -1  # what a woken wait says when libcurl's own timer, not a socket, woke it


class Failed(Exception):
    pass


class User:
    """One user: one multi handle, one easy handle reused for every request (its connection kept)."""

    def __init__(self, url: str) -> None:
        self.hub = get_hub()
        self.multi = multi = pycurl.CurlMulti()
        multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, 1)
        multi.setopt(pycurl.M_SOCKETFUNCTION, self._on_socket)
        multi.setopt(pycurl.M_TIMERFUNCTION, self._on_timer)
        self.easy = easy = pycurl.Curl()
        easy.setopt(pycurl.URL, url)
        easy.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS)
        easy.setopt(pycurl.SSL_VERIFYPEER, 0)  # the bench's nginx has a throwaway self-signed cert
        easy.setopt(pycurl.SSL_VERIFYHOST, 0)
        easy.setopt(pycurl.WRITEFUNCTION, self._on_body)
        self.body_bytes = 0
        self.active: dict[int, object] = {}  # fd -> the watcher of libcurl's current interest
        self.watchers: dict[tuple[int, int], object] = {}  # (fd, events) -> watcher, kept
        self.timer_ms = -1
        self.limit = self.hub.loop.timer(WAIT_LIMIT_S, WAIT_LIMIT_S)  # armed afresh per wait (``again``)
        self.waiting = None

    def _on_body(self, data: bytes) -> None:
        self.body_bytes += len(data)

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
        self.timer_ms = ms

    def _wake(self, fd: int, events: int) -> None:
        self.waiting.switch((fd, events))

    def _wait(self) -> tuple[int, int]:
        """Sleep on the hub until a socket libcurl watches is ready or its timer is due."""
        self.waiting = getcurrent()
        for fd, watcher in self.active.items():
            watcher.start(self._wake, fd, watcher.events & 3)
        due = None
        if self.timer_ms > 0:
            due = self.hub.loop.timer(self.timer_ms / 1000)
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

    def request(self) -> None:
        """One GET, read whole (``Tally.answered`` reads its figures). ``Failed`` on a transfer error."""
        multi, easy = self.multi, self.easy
        multi.add_handle(easy)
        try:
            running = 1
            while running:
                if self.timer_ms == 0:
                    self.timer_ms = -1
                    _, running = multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                    continue
                fd, events = self._wait()
                if fd == _TIMER:
                    self.timer_ms = -1
                    _, running = multi.socket_action(pycurl.SOCKET_TIMEOUT, 0)
                else:
                    _, running = multi.socket_action(fd, _ACTION[events])
            _, _, failed = multi.info_read()
        finally:
            multi.remove_handle(easy)
        if failed:
            raise Failed(f"libcurl error {failed[0][1]}: {failed[0][2]}")


class Tally:
    """The measured window's requests, failures and TTFB/TTLB histograms (µs), and the HTTP versions."""

    def __init__(self) -> None:
        self.ttfb, self.ttlb = HdrHistogram(1, 60_000_000, 3), HdrHistogram(1, 60_000_000, 3)
        self.requests = self.failures = 0
        self.errors: list[str] = []
        self.versions: set[int] = set()
        self.measuring = False

    def answered(self, easy) -> None:
        """A finished transfer of ``easy``: its HTTP version noted; in the window, its status and times
        (libcurl's µs since the transfer began; TTFB and TTLB from ``PRETRANSFER``) recorded."""
        self.versions.add(easy.getinfo(pycurl.INFO_HTTP_VERSION))
        if not self.measuring:
            return
        self.requests += 1
        if not 200 <= easy.getinfo(pycurl.RESPONSE_CODE) < 300:
            self.failures += 1
        sent = easy.getinfo(pycurl.PRETRANSFER_TIME_T)
        self.ttfb.record_value(max(1, easy.getinfo(pycurl.STARTTRANSFER_TIME_T) - sent))
        self.ttlb.record_value(max(1, easy.getinfo(pycurl.TOTAL_TIME_T) - sent))

    def failed(self, why: str) -> None:
        self.failures += 1
        if len(self.errors) < 3:
            self.errors.append(why[:200])

    def start(self) -> resource.struct_rusage:
        self.requests = self.failures = 0
        self.measuring = True
        _mark("start")
        return resource.getrusage(resource.RUSAGE_SELF)

    def end(self, before: resource.struct_rusage) -> dict:
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.measuring = False
        _mark("end")
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        requests = self.requests
        return {
            "requests": requests,
            "failures": self.failures,
            "errors": self.errors,
            "cpu_s": round(cpu_s, 3),
            "user_s": round(after.ru_utime - before.ru_utime, 3),
            "system_s": round(after.ru_stime - before.ru_stime, 3),
            "per_cpu_s": round(requests / cpu_s, 1) if cpu_s > 0 and requests else None,
            "http_versions": sorted(_version(v) for v in self.versions),
            "ttfb_p50_us": self.ttfb.get_value_at_percentile(50) if requests else None,
            "ttlb_p50_us": self.ttlb.get_value_at_percentile(50) if requests else None,
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
    tally, stop = Tally(), [False]

    def loop() -> None:
        user = User(url)
        while not stop[0]:
            try:
                user.request()
            except Failed as exc:
                tally.failed(str(exc))
                gevent.sleep(0.01)
                continue
            tally.answered(user.easy)

    greenlets = [gevent.spawn(loop) for _ in range(users)]
    gevent.sleep(warmup_s)
    before = tally.start()
    gevent.sleep(duration_s)
    figures = tally.end(before)
    stop[0] = True
    gevent.joinall(greenlets, timeout=WAIT_LIMIT_S + 1)
    return figures


def in_curl_loop(url: str, users: int, warmup_s: float, duration_s: float) -> dict:
    """libcurl's own shape: one multi for every user, driven by ``perform`` and its own ``poll``; no
    multiplexing, so one connection per user (``users`` transfers, each added again when it ends)."""
    multi = pycurl.CurlMulti()
    multi.setopt(pycurl.M_PIPELINING, 0)
    multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, users)
    tally = Tally()
    body = [0]

    def on_body(data: bytes) -> None:
        body[0] += len(data)

    for _ in range(users):
        easy = pycurl.Curl()
        easy.setopt(pycurl.URL, url)
        easy.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS)
        easy.setopt(pycurl.SSL_VERIFYPEER, 0)
        easy.setopt(pycurl.SSL_VERIFYHOST, 0)
        easy.setopt(pycurl.WRITEFUNCTION, on_body)
        multi.add_handle(easy)
    clock = time.monotonic
    ends, before, figures = clock() + warmup_s, None, None
    while True:
        if clock() >= ends:
            if before is None:
                before, ends = tally.start(), clock() + duration_s
            else:
                figures = tally.end(before)
                break
        while multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass
        _, done, failed = multi.info_read()
        for easy in done:
            tally.answered(easy)
            multi.remove_handle(easy)
            multi.add_handle(easy)
        for easy, _code, message in failed:
            tally.failed(f"libcurl error {_code}: {message}")
            multi.remove_handle(easy)
            multi.add_handle(easy)
        if not done and not failed:
            multi.select(WAIT_LIMIT_S)
    return figures


LOOPS = {"hub": on_hub, "curl": in_curl_loop}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--loop", choices=sorted(LOOPS), default="hub", help="whose loop drives libcurl")
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--warmup", type=float, default=1.0, help="s before the measured window")
    parser.add_argument("--duration", type=float, default=5.0, help="the measured window, s")
    args = parser.parse_args(argv)
    figures = LOOPS[args.loop](args.url, args.users, args.warmup, args.duration)
    print(json.dumps({"loop": args.loop, "users": args.users, **figures}, separators=(",", ":")))
    fine = figures["requests"] > 0 and figures["failures"] == 0 and figures["http_versions"] == ["2"]
    return 0 if fine else 1


if __name__ == "__main__":
    sys.exit(main())
