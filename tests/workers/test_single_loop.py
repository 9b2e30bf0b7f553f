"""The single loop of the closed-loop keep-alive arms (workers/engine/http/single_loop.py).

A child process (``single_loop_child``) runs an arm's users as the engine makes them, under a Locust
runner, with the loop on and off, against real local servers (plain and TLS on both libraries, the
test's own certificate); the servers count connections and answers. The engine itself is run
last, as a run starts it.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from portal.lib.stats.capacity import GEN_LAG_MS
from tests.conftest import run_module
from tests.engine_config import engine_config
from tests.servers import LocalServer, _RawServer, pages_handler
from tests.workers.test_client import chunked

BODY = b"hello"


class KeptRawServer(_RawServer):
    """A plain keep-alive server for what http.server cannot do, a thread per connection:
    ``split_head`` writes each answer's head in two parts 5 ms apart; ``close_after`` closes a
    connection silently (no ``Connection: close``) after that many answers; ``stall_after`` stops
    answering on a connection after that many, holding it open; ``garbled_after`` answers with a
    status line that is not HTTP/1.x after that many."""

    def __init__(
        self, split_head: bool = False, close_after: int = 0, stall_after: int = 0, garbled_after: int = 0
    ) -> None:
        super().__init__()
        self.split_head, self.close_after, self.stall_after = split_head, close_after, stall_after
        self.garbled_after = garbled_after
        self.lock = threading.Lock()
        self.connections = 0

    def _serve(self) -> None:
        while not self.stopping.is_set():
            conn = self.accept()
            if conn is not None:
                with self.lock:
                    self.connections += 1
                threading.Thread(target=self._keep, args=(conn,), daemon=True).start()

    def _request(self, conn, buf: bytes) -> bytes | None:
        """The bytes after the next request's head (None: the client went, or the server stops)."""
        while b"\r\n\r\n" not in buf:
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                if self.stopping.is_set():
                    return None
                continue
            if not chunk:
                return None
            buf += chunk
        return buf.partition(b"\r\n\r\n")[2]

    def _keep(self, conn) -> None:
        conn.settimeout(0.2)
        served, buf = 0, b""
        with conn:
            try:
                while (buf := self._request(conn, buf)) is not None:
                    if self.stall_after and served >= self.stall_after:
                        self.stopping.wait()
                        return
                    version = (
                        "HTTX/1.1" if self.garbled_after and served >= self.garbled_after else "HTTP/1.1"
                    )
                    head = f"{version} 200 OK\r\nContent-Length: {len(BODY)}\r\n\r\n".encode()
                    if self.split_head:
                        conn.sendall(head[:20])
                        time.sleep(0.005)
                        conn.sendall(head[20:] + BODY)
                    else:
                        conn.sendall(head + BODY)
                    served += 1
                    if self.close_after and served >= self.close_after:
                        return
            except OSError:
                return


def run_users(url: str, arm: str, single: bool, **more) -> dict:
    case = {"url": url, "arm": arm, "single": single, "users": 2, "seconds": 1.0, **more}
    proc = run_module("tests.workers.single_loop_child", case, 60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def fields(samples: list[dict]) -> set[tuple]:
    """What each answer said, as a set: the status, size and noted headers."""
    keys = ("status", "body_bytes", "content_type", "content_encoding", "server", "location")
    return {tuple(s[key] for key in keys) for s in samples}


def check_clean(got: dict) -> None:
    """The runner's quit left no socket open and the loop ended."""
    assert got["sockets_left"] == 0
    assert got["loop_ended"]


@pytest.mark.parametrize("arm,library", [("plain", "system"), ("tls", "system"), ("tls", "bundled")])
def test_the_loop_makes_the_clients_samples(arm, library, tls_cert):
    server = LocalServer(tls=tls_cert if arm == "tls" else None).start()
    try:
        runs = {}
        for single in (True, False):
            before = server.counters.snapshot()
            got = runs[single] = run_users(server.url("/1k"), arm, single, library=library)
            after = server.counters.snapshot()
            samples = got["samples"]
            assert len(samples) > 20
            assert all(s["ok"] and s["error"] is None and 0 < s["ttfb_us"] <= s["ttlb_us"] for s in samples)
            # One connection per user, opened by the user itself (its first request times it).
            assert after["connections"] - before["connections"] == 2
            assert sum(s["connect_us"] is not None for s in samples) == 2
            # Every answer recorded, besides at most one cut off per user by the quit.
            assert 0 <= (after["requests"] - before["requests"]) - len(samples) <= 2
            check_clean(got)
    finally:
        server.stop()
    assert runs[False]["loop"] is None
    assert {s["by"] for s in runs[False]["samples"]} == {"user"}
    loop = runs[True]["loop"]
    # Everything after each user's first request went through the loop, nothing handed back.
    assert loop["handed_back"] == 0
    assert loop["requests"] == len(runs[True]["samples"]) - 2
    assert [s["by"] for s in runs[True]["samples"]].count("loop") == loop["requests"]
    # The recorder counted every request either way, each answer as expected.
    for got in runs.values():
        assert got["result"]["requests"] == len(got["samples"])
        assert got["result"]["failures"] == 0
        assert got["result"]["status_codes"] == {"200": len(got["samples"])}
    # The same answers read the same way: status, size and the headers a sample keeps.
    (answer,) = fields(runs[True]["samples"])
    assert fields(runs[False]["samples"]) == {answer}
    assert answer[:2] == (200, 1024) and answer[4].startswith("BaseHTTP/")


def pages_and_chunked(request):
    return chunked(request) if request.path == "/chunked" else pages_handler(request)


@pytest.mark.parametrize(
    "case",
    ["chunked", "connection_close", "split_head", "silent_close"],
)
def test_answers_the_loop_does_not_read_are_finished_by_the_client(case):
    """Every answer but the plainest goes back to its user, whose client finishes it as it always
    did: the sizes right, no failure, and the connections the server ended reopened."""
    if case in ("chunked", "connection_close"):
        server = LocalServer(
            app=pages_and_chunked, max_requests_per_connection=3 if case == "connection_close" else None
        )
        url, size = server.url("/chunked" if case == "chunked" else "/1k"), 11 if case == "chunked" else 1024
    else:
        server = KeptRawServer(
            split_head=case == "split_head", close_after=3 if case == "silent_close" else 0
        )
        url, size = server.url("/"), len(BODY)
    server.start()
    try:
        got = run_users(url, "plain", True, seconds=0.8)
    finally:
        server.stop()
    samples = got["samples"]
    assert len(samples) > 10
    assert [s["error"] for s in samples if s["error"]] == []
    assert {(s["status"], s["body_bytes"]) for s in samples} == {(200, size)}
    loop = got["loop"]
    assert loop["handed_back"] > 0
    reopened = sum(s["reopened"] for s in samples)
    if case in ("connection_close", "silent_close"):
        # Every third answer ended its connection: the next request opened one, saying so.
        assert reopened >= len(samples) // 3 - 2 > 0
        if case == "silent_close":
            # The loop sent the fourth request on a connection the server had closed: the client
            # retried it on a new one, as it does after an idle close; nothing failed.
            assert loop["handed_back"] >= reopened - 2
    else:
        assert reopened == 0
        # Nothing it could read itself: every request the loop sent went back.
        assert loop["requests"] == 0
    check_clean(got)


def test_an_answer_that_is_not_http_fails_its_request_and_nothing_else():
    """A garbled status line on a kept connection: that request fails as ``protocol_error``, read by
    the client as without the loop, and every user goes on (the loop keeps serving the others)."""
    patterns = {}
    for single in (True, False):
        server = KeptRawServer(garbled_after=3).start()
        try:
            got = run_users(server.url("/"), "plain", single, seconds=0.8)
        finally:
            server.stop()
        samples = got["samples"]
        failed = [s for s in samples if s["error"]]
        assert {s["error"] for s in failed} == {"protocol_error"}
        assert {s["error_detail"] for s in failed} == {"ProtocolError: bad status line 'HTTX/1.1 200 OK'"}
        # Three answers and a failure per connection, for as long as it ran: the users went on.
        assert len(failed) >= 4 and len(samples) - len(failed) >= 3 * len(failed) - 2 * 3
        patterns[single] = {s["error"] for s in samples[:3]}
        if single:
            assert got["loop"]["handed_back"] >= len(failed) - 2
        check_clean(got)
    assert patterns[True] == patterns[False] == {None}


def test_a_stalled_connection_times_out_and_the_user_goes_on():
    """A server that stops answering on a kept connection: the request fails as ``timeout`` after
    the client's timeout, on the loop as without it, and the user opens a new connection."""
    patterns = {}
    for single in (True, False):
        server = KeptRawServer(stall_after=3).start()
        try:
            got = run_users(server.url("/"), "plain", single, users=1, seconds=2.5, timeout_s=0.4)
        finally:
            server.stop()
        samples = got["samples"]
        timeouts = [s for s in samples if s["error"]]
        assert {(s["error"], s["error_detail"]) for s in timeouts} == {("timeout", "TimeoutError: timed out")}
        # The wait is the client's timeout (0.4 s), checked by the loop every 0.1 s: never shorter; not
        # much longer (a loaded machine, the suite running in parallel, delays the check a little).
        waits_us = [(s["end_ns"] - s["start_ns"]) // 1000 for s in timeouts]
        assert all(400_000 <= wait < 1_000_000 for wait in waits_us), (single, waits_us)
        patterns[single] = [s["error"] for s in samples][:8]
        assert server.connections >= 2
        check_clean(got)
    # Three answers, a timeout, a new connection: the same story either way.
    assert patterns[True] == patterns[False] == [None, None, None, "timeout"] * 2


def test_the_engines_closed_loop_keep_alive_arms_run_on_it(engine, plain_server, tls_server):
    """As a run starts the engine: ``plain`` and ``tls`` in the closed loop on the single loop (the arm
    result says how many requests it made), ``tls_new`` on its users; the one-second ticks and the
    window still kept on time while the loop blocks in its own ``epoll``."""
    config = engine_config(
        {"plain": plain_server.url(), "tls": tls_server.url(), "tls_new": tls_server.url()},
        users=2,
        warmup_s=0.3,
        duration_s=1.2,
    )
    messages, code, stderr = engine(config)
    assert code == 0, stderr
    results = {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}
    for name in ("plain", "tls"):
        result = results[name]
        assert result["failures"] == 0 and result["requests"] > 20
        loop = result["single_loop"]
        assert loop["handed_back"] == 0
        # All but each user's first request (and the ones cut off by the stop) came from the loop.
        assert (
            loop["requests"]
            >= result["warmup_requests"] + result["requests"] + result["unwindowed_requests"] - 2
        )
        assert 1.1 < result["measured_s"] < 1.6
        (point,) = result["series"]
        # The tick came on time: the loop lets the hub run its timers (a capacity stage is judged
        # generator-bound from 50 ms late; yielding by a queued callback made it about 60).
        assert point["requests"] > 0 and point["loop_lag_ms"] < GEN_LAG_MS / 2
    assert results["tls_new"]["single_loop"] is None
    # One connection per user, plus the preflight's.
    assert plain_server.counters.snapshot()["connections"] == 2 + 1
