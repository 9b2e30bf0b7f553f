"""``tollgate demo`` and ``tollgate demo-target``: the demo stack, the demo target (Caddy: plain, TLS
with HTTP/2 and HTTP/3, and a port asking for client certificates), Celery workers, beat and the
portal on Gunicorn (its processes: ``portal.console.demo_target``)."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from portal.console.demo_target import (  # noqa: F401 - start_python_target: the tests' door to it
    PROCESS_NAME,
    DemoTarget,
    gunicorn_command,
    start_demo_target,
    start_logged,
    start_python_target,
    stop_processes,
    url_host,
    wait_for_port,
)
from portal.lib.tls.clientcerts import load_pair
from portal.projects.models import personal_project
from portal.runs.services import get_or_create_target
from portal.targets.clientcerts import save_client_cert
from portal.targets.models import Target

ACTIONS: tuple[str, ...] = ("demo", "demo-target")
DEMO_USER = "demo"
DEMO_PASSWORD = "tollgate-demo"  # noqa: S105 - the demo's published login, printed on start
DEMO_TARGET_NAME = "demo"
# What each port serves, the option of `manage.py tollgate demo` and the variable of `make demo`.
PORT_ROLES = {
    "web": ("the portal", "--port", "PORT"),
    "plain": ("the demo target (http)", "--plain-port", "PLAIN_PORT"),
    "tls": ("the demo target (https)", "--tls-port", "TLS_PORT"),
    "mtls": ("the demo target (https, client certificates)", "--mtls-port", "MTLS_PORT"),
}
# Ports whose UDP side is taken too: HTTP/3 on the demo's TLS port.
UDP_ROLES = ("tls",)
# The environment the CLI needs next to the demo (README, docs/): printed by the banner.
CLI_ENVIRONMENT = ("TOLLGATE_DEMO", "TOLLGATE_ALLOW_NETWORKS", "TOLLGATE_LOCAL_PROBE", "TOLLGATE_BASE_URL")
# Set for a real database or broker; the demo runs without them on its embedded ones (var/).
EMBEDDED_UNLESS_SET = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")


def add_arguments(sub) -> None:
    target = sub.add_parser(
        "demo-target", help="serve the demo site with Caddy over HTTP, HTTPS (h2, h3) and mTLS"
    )
    demo = sub.add_parser("demo", help="migrate, create the demo login, start web + worker + demo target")
    demo.add_argument("--port", type=int, default=8000)
    for parser in (target, demo):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--plain-port", type=int, default=8081)
        parser.add_argument("--tls-port", type=int, default=8443, help="TCP, and UDP for HTTP/3")
        parser.add_argument(
            "--mtls-port", type=int, default=None, help="asks for client certificates (default: TLS port + 1)"
        )


def handle(command: BaseCommand, options: dict) -> None:
    if options["action"] == "demo-target":
        serve_demo_target(command, options)
        return
    try:
        run_demo(
            command.stdout,
            web_port=options["port"],
            plain_port=options["plain_port"],
            tls_port=options["tls_port"],
            mtls_port=options["mtls_port"],
            host=options["host"],
        )
    except DemoError as exc:
        raise CommandError(str(exc)) from None


def serve_demo_target(command: BaseCommand, options: dict) -> None:
    """The demo target alone, until Ctrl-C, SIGTERM or one of its processes ends."""
    target = start_demo_target(
        settings.VAR_DIR / "demo-target",
        host=options["host"],
        plain_port=options["plain_port"],
        tls_port=options["tls_port"],
        mtls_port=options["mtls_port"],
    )
    procs = target.procs
    command.stdout.write(
        f"demo target (Caddy): {target.plain_url} and {target.tls_url} (self-signed; HTTP/3 on UDP), "
        f"client certificates at {target.mtls_url} (var/demo-target/tls/client.crt, client.key)"
    )
    command.stdout.flush()
    try:  # SIGTERM too (docker stop): Caddy runs in a session of its own and must be stopped with it
        _wait_for_stop({f"demo target process {proc.pid}": proc for proc in procs}, command.stdout)
    finally:
        stop_processes(procs)


class DemoError(Exception):
    """The demo cannot start (a port taken) or did not come up (a process died at start-up)."""


def port_taken(host: str, port: int, *, udp: bool = False) -> str | None:
    """Why ``host:port`` cannot be listened on (another process listens there), or None. Binds as
    Gunicorn and Caddy do (SO_REUSEADDR, so connections in TIME_WAIT do not count) and lets go at
    once. ``udp``: the UDP port (HTTP/3 on the demo's TLS port)."""
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    try:
        infos = socket.getaddrinfo(host, port, type=kind, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"{host} does not resolve: {exc.strerror}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _free_near(host: str, port: int, avoid: list[int]) -> int:
    """``port`` when it is free and not in ``avoid``, else the next such port (for the suggestion)."""
    for candidate in range(port, min(port + 200, 65535)):
        taken = port_taken(host, candidate) or port_taken(host, candidate, udp=True)
        if candidate not in avoid and not taken:
            return candidate
    return port


def check_ports(host: str, ports: dict[str, int]) -> None:
    """Raise DemoError naming every port of ``ports`` (keys of PORT_ROLES) that is taken, and how to
    choose others, before anything starts."""
    problems = []
    seen: dict[int, str] = {}
    for role, port in ports.items():
        what, option, variable = PORT_ROLES[role]
        if port in seen:
            problems.append(f"port {port} is given for {seen[port]} and {what} ({option}, {variable})")
            continue
        seen[port] = what
        why = port_taken(host, port)
        if why:
            problems.append(f"port {port} on {host} for {what} ({option}, {variable}) is taken: {why}")
        elif role in UDP_ROLES and (why := port_taken(host, port, udp=True)):
            problems.append(f"UDP port {port} on {host} for {what} ({option}, {variable}) is taken: {why}")
    if problems:
        chosen: list[int] = []
        for port in ports.values():
            chosen.append(_free_near(host, port, avoid=[*ports.values(), *chosen]))
        variables = [PORT_ROLES[role][2] for role in ports]
        suggestion = " ".join(f"{name}={port}" for name, port in zip(variables, chosen, strict=True))
        raise DemoError(
            "the demo cannot start, nothing was started:\n  "
            + "\n  ".join(problems)
            + "\nAnother demo may be running. Choose free ports: make demo "
            + suggestion
            + " (or manage.py tollgate demo --port … --plain-port … --tls-port … --mtls-port …)"
        )


def _answers(url: str, timeout_s: float = 30, client_cert: Path | None = None) -> int:
    """The HTTP status ``url`` answers (the demo target's certificate is self-signed), presenting the
    client certificate in ``client_cert`` (``client.crt``, ``client.key``) when the server asks. A
    worker's first request loads Django: on a busy machine that takes seconds, hence the generous
    timeout."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if client_cert is not None:
        context.load_cert_chain(client_cert / "client.crt", client_cert / "client.key")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as response:  # noqa: S310 - our own
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def check_up(
    named: dict[str, subprocess.Popen], urls: dict[str, str], logs: Path, client_cert: Path | None = None
) -> None:
    """Raise DemoError unless each URL answers 200 and every process still runs: a child that died
    at start-up is reported, never a false "is up". ``client_cert``: see ``_answers``."""
    for name, url in urls.items():
        try:
            status = _answers(url, client_cert=client_cert)
        except (OSError, ValueError) as exc:
            raise DemoError(f"{name} at {url} does not answer: {exc} (logs in {logs}/)") from None
        if status != 200:
            raise DemoError(f"{name} at {url} answers {status}, not 200 (logs in {logs}/)")
    for name, proc in named.items():
        if proc.poll() is not None:
            raise DemoError(f"{name} exited with code {proc.returncode} at start-up (logs in {logs}/)")


def cli_environment() -> str:
    """The shell line that gives a terminal the demo's environment (after demo_environment), for the
    CLI commands of the README and docs/: its database, broker, secrets, address policy and links."""
    unset = [name for name in EMBEDDED_UNLESS_SET if name not in os.environ]
    names = [*CLI_ENVIRONMENT, *(["TOLLGATE_VAR_DIR"] if "TOLLGATE_VAR_DIR" in os.environ else [])]
    values = {**os.environ, "TOLLGATE_DEMO": "1"}
    exports = " ".join(f"{name}={shlex.quote(values[name])}" for name in names if name in values)
    return (f"unset {' '.join(unset)}; " if unset else "") + f"export {exports}"


def ensure_demo_user() -> None:
    user, created = get_user_model().objects.get_or_create(
        username=DEMO_USER, defaults={"is_staff": True, "is_superuser": True}
    )
    if created or not user.check_password(DEMO_PASSWORD):
        user.set_password(DEMO_PASSWORD)
        user.save()
    personal_project(user)  # where the demo's runs go


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "workers.celery_app", *args, "-l", "info"]


def _start_services(host: str, web_port: int) -> dict[str, subprocess.Popen]:
    """The portal's own processes: a run worker, a maintenance worker (the reaper's queue, which a
    busy run worker cannot starve), beat and the web server."""
    logs = settings.VAR_DIR / "logs"
    named: dict[str, subprocess.Popen] = {}
    try:
        named["celery worker"] = start_logged(
            _celery("worker", "-Q", "runs", "--concurrency", "1"), logs / "worker.log"
        )
        named["maintenance worker"] = start_logged(
            _celery("worker", "-Q", "maintenance,celery", "--concurrency", "1", "-n", "maintenance@%h"),
            logs / "maintenance.log",
        )
        # The DatabaseScheduler (workers/celery_app.py): scenario schedules are rows of the database.
        named["celery beat"] = start_logged(_celery("beat"), logs / "beat.log")
        web_log = logs / "web.log"
        named["web"] = start_logged(
            gunicorn_command(
                "portal.wsgi:application", f"{host}:{web_port}", "--workers", "2", "--threads", "4"
            ),
            web_log,
        )
        wait_for_port(host, web_port, named["web"], web_log)
    except BaseException:
        stop_processes(list(named.values()))
        raise
    return named


def _wait_for_stop(named: dict[str, subprocess.Popen], stdout: IO[str]) -> None:
    """Until Ctrl-C, SIGTERM or one of the processes exits."""
    stop = {"now": False}

    def on_signal(signum, frame) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop["now"]:
        for name, proc in named.items():
            if proc.poll() is not None:
                stdout.write(f"{name} exited with code {proc.returncode}; stopping the demo.\n")
                stop["now"] = True
                break
        time.sleep(0.5)


def run_demo(
    stdout: IO[str],
    *,
    web_port: int = 8000,
    plain_port: int = 8081,
    tls_port: int = 8443,
    mtls_port: int | None = None,
    host: str = "127.0.0.1",
) -> None:
    """Check the ports, migrate, create the demo login, start everything, check that it answers,
    wait for Ctrl-C, stop everything. DemoError when a port is taken (nothing started) or a process
    does not come up (everything stopped). ``mtls_port``: the TLS port + 1 unless given."""
    ports = {"web": web_port, "plain": plain_port, "tls": tls_port, "mtls": mtls_port or tls_port + 1}
    check_ports(host, ports)
    demo_environment(host, web_port, plain_port, tls_port)
    call_command("migrate", "--noinput", verbosity=0)
    _run_services(stdout, host, ports)


def demo_environment(host: str, web_port: int, plain_port: int, tls_port: int) -> None:
    """What the children (web, workers) inherit: the form starts pre-filled with the demo target, and
    links made outside a request — the frozen, signed report's ``report_url``, callbacks, share links
    of webhook runs — point at this portal's port, not the default 8000."""
    os.environ.setdefault("TOLLGATE_BASE_URL", f"http://{host}:{web_port}")
    os.environ.setdefault("TOLLGATE_DEFAULT_PLAIN_URL", f"http://{host}:{plain_port}/1k")
    os.environ.setdefault("TOLLGATE_DEFAULT_TLS_URL", f"https://{host}:{tls_port}/1k")
    os.environ.setdefault("TOLLGATE_DEFAULT_VERIFY_TLS", "false")
    os.environ.setdefault("TOLLGATE_DEFAULT_LOCAL_PROCESS", PROCESS_NAME)
    os.environ.setdefault("TOLLGATE_LOCAL_PROBE", "1")
    # The outbound address policy lets the demo reach its own target on loopback (and nothing else).
    os.environ.setdefault("TOLLGATE_ALLOW_NETWORKS", "127.0.0.0/8,::1/128")


def store_demo_target(demo: DemoTarget) -> Target:
    """The demo user's target for the form's default URLs, holding the client certificate the demo
    made (replacing the last start's) and the mTLS URL: the ``tls_mtls`` arm works from the form and
    the CLI with no option of its own."""
    user = get_user_model().objects.get(username=DEMO_USER)
    target = get_or_create_target(personal_project(user), DEMO_TARGET_NAME, demo.plain_url, demo.tls_url)
    if target.mtls_url != demo.mtls_url:
        target.mtls_url = demo.mtls_url
        target.save(update_fields=["mtls_url"])
    save_client_cert(target, load_pair(*demo.client_cert))
    return target


def _run_services(stdout: IO[str], host: str, ports: dict[str, int]) -> None:
    ensure_demo_user()
    logs = settings.VAR_DIR / "logs"
    try:
        target = start_demo_target(
            settings.VAR_DIR / "demo-target", host, ports["plain"], ports["tls"], ports["mtls"]
        )
    except RuntimeError as exc:
        raise DemoError(f"the demo target did not start: {exc}") from None
    named = {"demo target (Caddy)": target.procs[0]}
    try:
        store_demo_target(target)
        try:
            named.update(_start_services(host, ports["web"]))
        except RuntimeError as exc:
            raise DemoError(f"the portal did not start: {exc}") from None
        web = f"http://{url_host(host)}:{ports['web']}"
        check_up(
            named,
            {
                "the portal": f"{web}/accounts/login/",
                "the demo target (http)": target.plain_url,
                "the demo target (https)": target.tls_url,
                "the demo target (https, client certificate)": target.mtls_url,
            },
            logs,
            client_cert=settings.VAR_DIR / "demo-target" / "tls",
        )
        stdout.write(
            "\nTollgate demo is up.\n"
            f"  portal:       {web}/   login: {DEMO_USER} / {DEMO_PASSWORD}\n"
            f"  demo target:  Caddy at {target.plain_url}  and  {target.tls_url}\n"
            "                (HTTP/1.1, HTTP/2, HTTP/3; self-signed: untick 'Verify TLS certificate',\n"
            "                --insecure in the CLI)\n"
            f"                client certificates asked for at {target.mtls_url} (the tls_mtls arm)\n"
            f"  logs:         {logs}/  (the target's JSON access log: demo-target-access.log)\n"
            "  CLI (manage.py tollgate …, README and docs/) in another terminal, first paste:\n"
            f"    {cli_environment()}\n"
            "Ctrl-C stops everything.\n"
        )
        stdout.flush()
        _wait_for_stop(named, stdout)
    finally:
        stop_processes(list(named.values()))
