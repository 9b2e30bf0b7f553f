"""The engine connects to the address the outbound policy pinned and never resolves the host itself.

The engine runs as a real subprocess with ``tests/workers/dnsguard`` on its path: every name lookup
it makes is logged and refused (so nothing can leave loopback), which proves it never asked DNS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portal.lib.runs.protocol import pin_key
from tests.conftest import ROOT
from tests.engine_config import engine_config
from tests.servers import HostsSeen, LocalServer, pages_handler

GUARD = Path(__file__).resolve().parent / "dnsguard"


def run_guarded(config: dict, log: Path) -> tuple[list[dict], int, str, list[str]]:
    """The real engine, with every name lookup refused and written to ``log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(GUARD)]), "DNS_GUARD_LOG": str(log)}
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "workers.engine"],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    asked = log.read_text().split() if log.exists() else []
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.returncode, proc.stderr, asked


def config(arms: dict[str, str], pinned: dict[str, str] | None) -> dict:
    return engine_config(arms, pinned=pinned)


def test_the_engine_connects_to_the_pinned_address_and_keeps_the_name(tmp_path, tls_cert):
    seen = HostsSeen()
    plain = LocalServer(app=seen).start()
    tls = LocalServer(app=seen, tls=tls_cert).start()
    seen.watch_sni(tls)
    # A name no resolver knows: only the pin can take the engine to the servers.
    arms = {"plain": f"http://rebind.test:{plain.port}/1k", "tls": f"https://rebind.test:{tls.port}/1k"}
    try:
        messages, code, stderr, asked = run_guarded(
            config(arms, {pin_key(url): "127.0.0.1" for url in arms.values()}), tmp_path / "dns.log"
        )
    finally:
        plain.stop()
        tls.stop()
    assert code == 0, stderr[-3000:]
    assert asked == []  # the engine never looked a name up
    results = {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}
    assert results["plain"]["requests"] > 0 and results["tls"]["requests"] > 0
    assert {r["address"] for r in results.values()} == {"127.0.0.1"}
    # The name stays for Host and SNI: virtual hosts and certificates see what the user typed.
    assert set(seen.hosts) == {f"rebind.test:{plain.port}", f"rebind.test:{tls.port}"}
    assert set(seen.server_names) == {"rebind.test"}
    (tls_info,) = [m["info"] for m in messages if m["type"] == "tls_info"]
    assert tls_info["error"] is None and tls_info["protocol"]


def test_without_a_pin_the_engine_would_resolve(tmp_path, plain_server):
    # The guard is real: the same run without a pin asks for the name, and fails on the refusal.
    url = f"http://rebind.test:{plain_server.port}/1k"
    messages, code, stderr, asked = run_guarded(config({"plain": url}, None), tmp_path / "dns.log")
    assert code != 0
    assert asked == ["rebind.test"]
    assert plain_server.counters.snapshot()["connections"] == 0


@pytest.mark.parametrize(
    "location",
    [
        "http://127.0.0.2:{port}/1k",  # another host (on loopback here: no packet leaves the machine)
        "http://metadata.internal/latest/meta-data/",  # a name: not even looked up
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_a_redirect_to_another_host_is_not_followed(tmp_path, location):
    other = LocalServer(host="127.0.0.2").start()
    location = location.format(port=other.port)

    def redirect(request):
        if request.path == "/start":
            return 302, {"Location": location}, b""
        return pages_handler(request)

    origin = LocalServer(app=redirect).start()
    url = f"http://allowed.test:{origin.port}/start"
    try:
        messages, code, stderr, asked = run_guarded(
            config({"plain": url}, {pin_key(url): "127.0.0.1"}), tmp_path / "dns.log"
        )
    finally:
        origin.stop()
        other.stop()
    (error,) = [m["error"] for m in messages if m["type"] == "arm_error"]
    assert f"redirects (302) to {location}, which leaves the arm's origin" in error
    assert origin.counters.snapshot()["requests"] == 1
    assert other.counters.snapshot()["connections"] == 0
    assert asked == []
