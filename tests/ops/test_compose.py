"""docker-compose.yml's healthchecks run as written (Docker is not here: the commands are)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.ops.conftest import seen

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _test_of(service: str) -> list[str]:
    check = COMPOSE["services"][service]["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "python"
    return [sys.executable, *check[2:]]


def test_every_worker_container_checks_its_own_presence():
    for service in ("worker", "generator", "maintenance"):
        assert _test_of(service)[1:] == ["manage.py", "tollgate", "healthcheck", "worker"], service


@pytest.mark.django_db(transaction=True)
def test_the_web_healthcheck_follows_readyz(live_server):
    command = [part.replace("http://127.0.0.1:8000", live_server.url) for part in _test_of("web")]
    assert any("/readyz" in part for part in command)
    failing = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert failing.returncode == 1 and "503" in failing.stderr  # no run worker yet
    seen("celery@gen1", "gen1", ["runs"])
    ready = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert ready.returncode == 0, ready.stderr[-1000:]


def test_the_demo_target_service_runs_caddy_and_its_healthcheck_passes(tmp_path):
    """The demo-target container's command, as written but on loopback and free ports (the compose
    file binds every address of its container): Caddy answers its healthcheck, speaks HTTP/2 on the
    TLS port and asks for a client certificate on the mTLS port."""
    import os
    import shlex
    import signal
    import socket
    import ssl
    import time
    import urllib.request

    from tests.servers import closed_port

    service = COMPOSE["services"]["demo-target"]
    command = shlex.split(service["command"])
    ports = {"8081": str(closed_port()), "8443": str(closed_port()), "8444": str(closed_port())}
    command = [ports.get(part, "127.0.0.1" if part == "0.0.0.0" else part) for part in command]  # noqa: S104
    assert command[:4] == ["python", "manage.py", "tollgate", "demo-target"]
    check = [part.replace(":8081/", f":{ports['8081']}/") for part in _test_of("demo-target")]
    env = {**os.environ, "TOLLGATE_DEMO": "1", "TOLLGATE_VAR_DIR": str(tmp_path)}
    proc = subprocess.Popen(  # noqa: S603 - this interpreter, the compose file's own command
        [sys.executable, *command[1:]],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        banner = proc.stdout.readline()
        assert "demo target (Caddy)" in banner and f"127.0.0.1:{ports['8444']}" in banner, banner
        deadline = time.monotonic() + 30
        while subprocess.run(check, capture_output=True, timeout=30).returncode != 0:  # noqa: S603
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        url = f"https://127.0.0.1:{ports['8443']}/1k"
        with urllib.request.urlopen(url, context=context, timeout=5) as answer:  # noqa: S310 - loopback
            assert answer.status == 200 and answer.headers["Alt-Svc"].startswith(f'h3=":{ports["8443"]}"')
        with pytest.raises(OSError):  # no client certificate: the mTLS port ends the handshake
            urllib.request.urlopen(f"https://127.0.0.1:{ports['8444']}/1k", context=context, timeout=5)  # noqa: S310
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    # docker stop's SIGTERM stops its Caddy too (a session of its own): none of its ports answers.
    for port in ports.values():
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
