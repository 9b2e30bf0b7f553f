"""`manage.py tollgate demo` on a busy machine: a port another process holds stops it before anything
starts, with which port and how to choose others; a process that dies at start-up is reported, never
a false "is up"; the banner's environment line gives a terminal what the CLI needs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from portal.console import demo
from tests.servers import closed_port

ROOT = Path(__file__).resolve().parent.parent.parent


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def test_a_taken_port_stops_the_demo_before_anything_starts(tmp_path):
    web, tls, mtls = closed_port(), closed_port(), closed_port()
    with socket.socket() as held:  # another instance's target, as it were
        held.bind(("127.0.0.1", 0))
        held.listen()
        plain = held.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in demo.EMBEDDED_UNLESS_SET}
        proc = subprocess.run(  # noqa: S603 - this interpreter, our own command
            [sys.executable, "manage.py", "tollgate", "demo"]
            + [
                "--port",
                str(web),
                "--plain-port",
                str(plain),
                "--tls-port",
                str(tls),
                "--mtls-port",
                str(mtls),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**env, "TOLLGATE_DEMO": "1", "TOLLGATE_VAR_DIR": str(tmp_path)},
            timeout=120,
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Tollgate demo is up" not in proc.stdout
    blamed = f"port {plain} on 127.0.0.1 for the demo target (http) (--plain-port, PLAIN_PORT) is taken"
    assert blamed in proc.stderr
    assert "Address already in use" in proc.stderr
    # The free ones are not blamed.
    assert f"port {web} " not in proc.stderr and f"port {tls} " not in proc.stderr
    assert "Choose free ports: make demo PORT=" in proc.stderr and "PLAIN_PORT=" in proc.stderr
    # Nothing started, nothing migrated, nothing logged.
    assert _refused(web) and _refused(tls)
    assert not (tmp_path / "tollgate.sqlite3").exists() and not (tmp_path / "logs").exists()


def test_the_suggested_ports_are_free_and_distinct():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(demo.DemoError) as caught:
            demo.check_ports("127.0.0.1", {"web": port, "plain": port, "tls": closed_port()})
        message = str(caught.value)
        assert f"port {port} on 127.0.0.1 for the portal (--port, PORT) is taken" in message
        assert f"port {port} is given for the portal and the demo target (http)" in message
        suggested = dict(item.split("=") for item in message.split("make demo ")[1].split(" (")[0].split())
        ports = [int(suggested[name]) for name in ("PORT", "PLAIN_PORT", "TLS_PORT")]
        assert len(set(ports)) == 3 and port not in ports
        assert all(demo.port_taken("127.0.0.1", p) is None for p in ports)


def test_a_process_that_died_at_start_up_is_reported(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])  # noqa: S603 - this interpreter
    dead.wait(timeout=30)
    with pytest.raises(demo.DemoError, match=r"celery worker exited with code 3 at start-up"):
        demo.check_up({"celery worker": dead}, {}, tmp_path)
    port = closed_port()
    with pytest.raises(demo.DemoError, match=rf"the portal at http://127.0.0.1:{port}/ does not answer"):
        demo.check_up({}, {"the portal": f"http://127.0.0.1:{port}/"}, tmp_path)


def test_the_banner_environment_line_is_what_a_shell_needs(monkeypatch):
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgres://x@db/y", "TOLLGATE_VAR_DIR": "/tmp/a b"}
    monkeypatch.setattr(os, "environ", env)
    demo.demo_environment("127.0.0.1", 48123, 48124, 48125)
    line = demo.cli_environment()
    # The demo's own database URL is never printed (it may hold a password); the embedded ones are.
    assert "postgres://" not in line and line.startswith("unset CELERY_BROKER_URL REDIS_URL; export ")
    shell = subprocess.run(  # noqa: S603 - bash from the machine, our own line
        ["bash", "-c", f"{line}; env"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "CELERY_BROKER_URL": "redis://elsewhere"},
        check=True,
    )
    got = dict(row.split("=", 1) for row in shell.stdout.splitlines() if "=" in row)
    assert got["TOLLGATE_DEMO"] == "1" and got["TOLLGATE_ALLOW_NETWORKS"] == "127.0.0.0/8,::1/128"
    assert got["TOLLGATE_BASE_URL"] == "http://127.0.0.1:48123" and got["TOLLGATE_LOCAL_PROBE"] == "1"
    assert got["TOLLGATE_VAR_DIR"] == "/tmp/a b" and "CELERY_BROKER_URL" not in got


def test_a_taken_udp_port_stops_the_demo_too():
    """HTTP/3 answers on the UDP side of the TLS port: a process holding that one stops the demo."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held, socket.socket() as tcp:
        # A UDP port whose TCP side this test holds too, then lets go: another program's TCP
        # listener on the same number (the parallel tests run servers) would change the answer.
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", 0))
        port = tcp.getsockname()[1]
        held.bind(("127.0.0.1", port))
        tcp.close()
        assert demo.port_taken("127.0.0.1", port) is None  # TCP is free
        with pytest.raises(
            demo.DemoError, match=rf"UDP port {port} on 127.0.0.1 for the demo target \(https\)"
        ):
            demo.check_ports("127.0.0.1", {"tls": port})
        demo.check_ports("127.0.0.1", {"plain": port})  # the plain port needs TCP only
