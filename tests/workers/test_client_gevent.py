"""The timed client as the engine runs it: under gevent, connections driven directly
(workers/engine/http/cooperative.py).

``test_client.py`` checks the client on plain threads (blocking sockets); here a child process
patches like the engine and runs the same client against real local servers (plain and TLS, the
test's own certificate), so the cooperative path is checked for framing, TLS policies, errors,
timeouts and concurrency.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_module
from tests.faulty_servers import SilentServer
from tests.servers import LocalServer, Paced, closed_port, pages_handler
from tests.workers.test_client import chunked


def run_cases(cases: list[dict], timeout: float = 60) -> dict:
    proc = run_module("tests.workers.gevent_client_child", cases, timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def big_or_chunked(request):
    if request.path == "/chunked":
        return chunked(request)
    if request.path == "/big":
        return 200, {}, b"x" * 70_000
    if request.path == "/slow":
        return 200, {"Content-Type": "text/plain"}, Paced([(0.3, b"y" * 100)])
    return pages_handler(request)


@pytest.fixture
def servers(tls_cert):
    plain = LocalServer(app=big_or_chunked).start()
    tls = LocalServer(app=big_or_chunked, tls=tls_cert).start()
    yield plain, tls
    plain.stop()
    tls.stop()


def test_framing_and_keep_alive_under_gevent(servers):
    plain, tls = servers
    got = run_cases(
        [
            {"name": "big", "url": plain.url("/big"), "path": "/big", "arm": "plain", "requests": 3},
            {
                "name": "chunked",
                "url": plain.url("/chunked"),
                "path": "/chunked",
                "arm": "plain",
                "requests": 2,
            },
            {"name": "tls_big", "url": tls.url("/big"), "path": "/big", "arm": "tls", "requests": 3},
        ]
    )
    for name, size in (("big", 70_000), ("chunked", 11), ("tls_big", 70_000)):
        case = got[name]
        assert case["kinds"] == ["CoopConnection"]
        assert [s["error"] for s in case["samples"]] == [None] * len(case["samples"])
        assert all(
            s["coop"] and s["body_bytes"] == size and 0 < s["ttfb_us"] <= s["ttlb_us"]
            for s in case["samples"]
        )
        # Keep-alive: only the first request opened a connection.
        assert [s["connect_us"] is not None for s in case["samples"]] == [True] + [False] * (
            len(case["samples"]) - 1
        )
    assert plain.counters.snapshot()["connections"] == 2
    assert tls.counters.snapshot()["connections"] == tls.counters.snapshot()["handshakes"] == 1


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_tls_policies_under_gevent(servers, library):
    _, tls = servers
    got = run_cases(
        [
            {"name": "new", "url": tls.url(), "arm": "tls_new", "requests": 4, "library": library},
            {"name": "resumed", "url": tls.url(), "arm": "tls_resumed", "requests": 4, "library": library},
        ]
    )
    new, resumed = got["new"]["samples"], got["resumed"]["samples"]
    assert all(s["error"] is None and s["tls_handshake_us"] > 0 and s["session_reused"] is False for s in new)
    assert all(s["ttlb_us"] >= s["connect_us"] + s["tls_handshake_us"] for s in new + resumed)
    # The first connection has no session to offer; every later one resumes the previous one's.
    assert [s["session_reused"] for s in resumed] == [False, True, True, True]
    assert tls.counters.snapshot() == {"connections": 8, "handshakes": 8, "resumed": 3, "requests": 8}


def test_the_bundled_library_under_gevent_reads_big_bodies_and_checks_certificates(servers, tls_cert):
    _, tls = servers
    bundled = {"url": tls.url("/big"), "path": "/big", "library": "bundled"}
    got = run_cases(
        [
            {"name": "big", "arm": "tls", "requests": 3, **bundled},
            {"name": "unknown", "arm": "tls_new", "verify": True, **bundled},
            {"name": "trusted", "arm": "tls_new", "verify": True, "cafile": str(tls_cert[0]), **bundled},
        ]
    )
    big = got["big"]["samples"]
    assert got["big"]["kinds"] == ["CoopConnection"]
    assert [(s["error"], s["body_bytes"]) for s in big] == [(None, 70_000)] * 3
    assert [s["connect_us"] is not None for s in big] == [True, False, False]  # keep-alive
    unknown = got["unknown"]["samples"][0]
    assert unknown["error"] == "tls_error" and "CERTIFICATE_VERIFY_FAILED" in unknown["error_detail"]
    assert got["trusted"]["samples"][0]["status"] == 200


def test_errors_and_timeouts_under_gevent(servers):
    _, tls = servers
    silent = SilentServer()
    try:
        got = run_cases(
            [
                {"name": "verify", "url": tls.url(), "arm": "tls", "verify": True},
                {"name": "refused", "url": f"http://127.0.0.1:{closed_port()}/1k", "arm": "plain_new"},
                {"name": "silent", "url": silent.url(), "arm": "plain", "timeout_s": 0.3, "requests": 2},
                # Four answers 0.3 s late each on one kept connection, 0.5 s allowed per wait: 1.2 s of
                # waiting in all, never 0.5 s in one wait.
                {
                    "name": "late",
                    "url": tls.url("/slow"),
                    "path": "/slow",
                    "arm": "tls",
                    "timeout_s": 0.5,
                    "requests": 4,
                },
            ]
        )
    finally:
        silent.stop()
    verify = got["verify"]["samples"][0]
    assert verify["error"] == "tls_error" and "CERTIFICATE_VERIFY_FAILED" in verify["error_detail"]
    assert got["refused"]["samples"][0]["error"] == "connection_refused"
    # Each wait times out on its own: two timeouts, ~0.3 s each.
    silent_case = got["silent"]
    assert [s["error"] for s in silent_case["samples"]] == ["timeout", "timeout"]
    assert 0.55 < silent_case["wall_s"] < 3.0
    # The user's one timer is re-armed in full for each wait: the waits' time does not add up to a timeout.
    assert [(s["error"], s["body_bytes"]) for s in got["late"]["samples"]] == [(None, 100)] * 4


def test_users_wait_cooperatively(servers):
    plain, tls = servers
    got = run_cases(
        [
            {"name": "plain", "url": plain.url("/slow"), "path": "/slow", "arm": "plain_new", "users": 6},
            {"name": "tls", "url": tls.url("/slow"), "path": "/slow", "arm": "tls_new", "users": 6},
        ]
    )
    for name in ("plain", "tls"):
        case = got[name]
        assert [s["body_bytes"] for s in case["samples"]] == [100] * 6
        assert all(s["ttlb_us"] >= 300_000 for s in case["samples"])
        # Six users each waiting 0.3 s for the server: together, not one after the other (1.8 s).
        assert case["wall_s"] < 1.2, case["wall_s"]
