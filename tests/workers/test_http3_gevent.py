"""The HTTP/3 client as the engine runs it: under gevent, its QUIC connections waiting on the hub
(``workers/engine/http/http3/driver.py``). A child process patches like the engine and runs the client
against a real Caddy: several lanes (streams) on one connection, the per-request modes, a refusal,
a silent port and a lossy path; every count checked against Caddy's access log.
``test_http3_client.py`` checks the same client on plain threads.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest

from bench.caddy import Caddy
from portal.lib.demo.caddy import EARLY_DATA_HEADER
from tests.conftest import run_module
from tests.udp_relay import UdpRelay


@pytest.fixture(scope="module")
def caddy():
    try:
        server = Caddy(key_types=("ec",)).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


def run_cases(cases: list[dict], timeout: float = 60) -> dict:
    proc = run_module("tests.workers.gevent_h3_child", cases, timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def tagged(path: str = "/1k") -> tuple[str, str]:
    tag = uuid.uuid4().hex[:12]
    return f"{path}?t={tag}", tag


def served(server: Caddy, tag: str, expected: int) -> list[dict]:
    deadline = time.monotonic() + 5
    while True:
        entries = [e for e in server.access_log_entries() if f"t={tag}" in e["request"]["uri"]]
        if len(entries) >= expected or time.monotonic() > deadline:
            return entries
        time.sleep(0.02)


def answered(samples: list[dict], size: int = 1024) -> bool:
    return all((s["status"], s["body_bytes"], s["error"]) == (200, size, None) for s in samples)


def test_lanes_share_one_connection_per_user_and_the_modes_under_gevent(caddy):
    shared, shared_tag = tagged()
    paths = {arm: tagged() for arm in ("h3_new", "h3_resumed", "h3_0rtt")}
    cases = [
        {
            "name": "h3",
            "port": caddy.tls_port,
            "arm": "h3",
            "users": 2,
            "streams": 6,
            "requests": 5,
            "path": shared,
        }
    ] + [
        {"name": arm, "port": caddy.tls_port, "arm": arm, "requests": 3, "path": path}
        for arm, (path, _) in paths.items()
    ]
    got = run_cases(cases)
    h3 = got["h3"]
    assert h3["coop"] and len(h3["samples"]) == 60 and answered(h3["samples"])
    assert max(s["streams_in_flight"] for s in h3["samples"]) > 1  # lanes overlapped on a connection
    assert [f["requests"] for f in h3["ended"]] == [30, 30] and all(f["closed"] for f in h3["ended"])
    entries = served(caddy, shared_tag, 60)
    assert len(entries) == 60 and {e["request"]["proto"] for e in entries} == {"HTTP/3.0"}
    assert len({e["request"]["remote_port"] for e in entries}) == 2  # one connection per user
    for arm, (_, tag) in paths.items():
        samples = got[arm]["samples"]
        assert answered(samples) and len(got[arm]["ended"]) == 3, arm
        resumed = [e["request"]["tls"]["resumed"] for e in served(caddy, tag, 3)]
        assert resumed == ([False] * 3 if arm == "h3_new" else [False, True, True]), arm
    assert [s["early_data"] for s in got["h3_0rtt"]["samples"]] == ["no_ticket", "accepted", "accepted"]
    entries = served(caddy, paths["h3_0rtt"][1], 3)
    marks = [bool(e.get("resp_headers", {}).get(EARLY_DATA_HEADER)) for e in entries]
    assert not marks[0] and any(marks)  # marked: handled before the handshake ended (some, not all)


def test_refusals_and_a_lossy_path_under_gevent(caddy):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as closed:
        closed.bind(("127.0.0.1", 0))
        closed_port = closed.getsockname()[1]
    lossy, tag = tagged("/4k")
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent,
        UdpRelay(("127.0.0.1", caddy.tls_port), drop_every=5) as relay,
    ):
        silent.bind(("127.0.0.1", 0))
        got = run_cases(
            [
                {"name": "closed", "port": closed_port, "arm": "h3_new"},
                {
                    "name": "silent",
                    "port": silent.getsockname()[1],
                    "arm": "h3_new",
                    "handshake_timeout_s": 0.5,
                },
                {
                    "name": "lossy",
                    "port": relay.port,
                    "arm": "h3",
                    "streams": 4,
                    "requests": 6,
                    "path": lossy,
                },
            ]
        )
    [closed_sample] = got["closed"]["samples"]
    assert closed_sample["error"] == "connection_refused" and got["closed"]["wall_s"] < 5
    [silent_sample] = got["silent"]["samples"]
    assert silent_sample["error"] == "timeout" and "no answer on UDP" in silent_sample["error_detail"]
    assert 0.5 <= got["silent"]["wall_s"] < 2
    lossy_run = got["lossy"]
    assert len(lossy_run["samples"]) == 24 and answered(lossy_run["samples"], size=4096)
    [facts] = lossy_run["ended"]
    assert relay.dropped["to_server"] >= 1 and facts["packets_lost"] + facts["pto_count"] >= 1
    assert facts["bytes_sent"] == relay.bytes_from_client
    assert len(served(caddy, tag, 24)) == 24
