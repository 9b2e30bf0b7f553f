"""The demo target on real Gunicorn, over HTTP and HTTPS: fixed-size pages and a real PNG."""

from __future__ import annotations

import json
import os
import ssl
import struct
import urllib.request
import zlib
from pathlib import Path

from portal.lib.demo_target import PROCESS_NAME
from portal.runs.demo import start_demo_target, stop_processes
from tests.conftest import run_engine
from tests.servers import closed_port


def fetch(url: str) -> tuple[int, str, bytes]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=context, timeout=5) as response:  # noqa: S310 - loopback
        return response.status, response.headers["Content-Type"], response.read()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, …), from /proc."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue  # the task ended meanwhile
            found.extend(children)
            todo.extend(children)
    return found


def comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def test_demo_target_serves_pages_and_an_image_over_http_and_https(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    plain_port, tls_port = closed_port(), closed_port()
    procs = start_demo_target(tmp_path, plain_port=plain_port, tls_port=tls_port)
    try:
        for base in (f"http://127.0.0.1:{plain_port}", f"https://127.0.0.1:{tls_port}"):
            for path, size in (("/1k", 1024), ("/2k", 2048), ("/4k", 4096)):
                status, ctype, body = fetch(base + path)
                assert (status, len(body)) == (200, size) and ctype.startswith("text/html")
            status, ctype, png = fetch(base + "/logo.png")
            assert status == 200 and ctype == "image/png"
            # A real PNG: signature, a 96×96 RGB header, and image data that inflates to 96 rows.
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            width, height, depth, color = struct.unpack(">IIBB", png[16:26])
            assert (width, height, depth, color) == (96, 96, 8, 2)
            idat_len = struct.unpack(">I", png[33:37])[0]
            assert len(zlib.decompress(png[41 : 41 + idat_len])) == 96 * (1 + 96 * 3)
        # The workers carry the demo's process name, so the local probe can sample them by it.
        # Only the processes this test started count: another demo on the machine must not.
        ours = [pid for proc in procs for pid in descendants(proc.pid)]
        named = [pid for pid in ours if comm(pid) == PROCESS_NAME]
        assert len(named) == 2, (named, ours)  # one worker per port
        assert Path(f"/proc/{os.getpid()}/comm").read_text().strip() != PROCESS_NAME  # importers keep theirs
    finally:
        stop_processes(procs)


def tls_sessions(port: int) -> dict[str, int]:
    """The demo worker's own count of TLS connections and resumed sessions (this request's own
    connection is counted after it is answered)."""
    return json.loads(fetch(f"https://127.0.0.1:{port}/tls-sessions")[2])


def test_the_demo_target_resumes_tls_sessions(tmp_path, settings):
    """tls_resumed against the demo target resumes (Gunicorn alone would build a new TLS context per
    connection, and nothing would ever resume), as the server counts it; tls_new never does."""
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    plain_port, tls_port = closed_port(), closed_port()
    procs = start_demo_target(tmp_path, plain_port=plain_port, tls_port=tls_port)
    url = f"https://127.0.0.1:{tls_port}/1k"
    try:
        before = tls_sessions(tls_port)
        messages, code, stderr = run_engine(
            {
                "arms": [{"name": "tls_new", "url": url}, {"name": "tls_resumed", "url": url}],
                "users": 2,
                "spawn_rate": 100,
                "warmup_s": 0.5,
                "duration_s": 2,
                "verify_tls": False,
                "arrival_rate": 100,
            }
        )
        after = tls_sessions(tls_port)
    finally:
        stop_processes(procs)
    assert code == 0, stderr
    results = {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}
    new, resumed = results["tls_new"], results["tls_resumed"]
    assert new["tls_sessions_reused"] == 0 and new["requests"] > 20  # 200 planned; a busy machine gets fewer
    assert resumed["tls_sessions_reused"] >= 0.9 * resumed["requests"] > 20
    # The server's side: every resumed session came from tls_resumed (tls_new never offers one),
    # and at least 90% of tls_resumed's connections (warm-up and window) resumed.
    served = after["handshakes"] - before["handshakes"]
    server_resumed = after["resumed"] - before["resumed"]
    resumed_connections = resumed["warmup_requests"] + resumed["requests"]
    assert served >= new["warmup_requests"] + new["requests"] + resumed_connections
    # Sent but not measured, resumed on the server: the requests that straddled the start of the window
    # or ended after it closed (a loaded machine stops its users late), and the preflight's.
    uncounted = resumed["unwindowed_requests"] + 2
    assert 0.9 * resumed_connections <= server_resumed <= resumed_connections + uncounted
    facts = next(m["info"] for m in messages if m["type"] == "tls_info")
    assert facts["session_ticket"] is True and facts["session_resumed"] is True


def test_the_demo_on_another_port_links_to_that_port(monkeypatch):
    """``tollgate demo --port P``: the workers freeze reports and make webhook and callback links
    outside any request, from TOLLGATE_BASE_URL, so the children must inherit the demo's own port."""
    from portal.runs import demo

    children = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}
    monkeypatch.setattr(os, "environ", children)
    demo.demo_environment("127.0.0.1", 48123, 48124, 48125)
    assert children["TOLLGATE_BASE_URL"] == "http://127.0.0.1:48123"
    assert children["TOLLGATE_DEFAULT_PLAIN_URL"] == "http://127.0.0.1:48124/1k"
    children["TOLLGATE_BASE_URL"] = "https://tollgate.example"
    demo.demo_environment("127.0.0.1", 48123, 48124, 48125)
    assert children["TOLLGATE_BASE_URL"] == "https://tollgate.example"  # an operator's value stays
