"""A throwaway nginx on loopback: one plain HTTP port and one TLS port, in a temp directory.

Debian's nginx binary runs with ``daemon off`` as a child process in its own session, with every
path it writes (pid file, error log, temp directories) inside the temp directory. It serves three
static pages of exact sizes (``/1k``, ``/2k``, ``/4k``) with a fresh self-signed certificate, keeps
connections alive for 100 000 requests (``keepalive_requests``: fewer, to test a server that ends
them) and resumes TLS sessions (shared cache and tickets).

Used by the fidelity benchmark (``bench/fidelity``) and by tests::

    with Nginx() as nginx:
        url = nginx.tls_url("/1k")

It prints nothing. Without an nginx binary the constructor raises ``RuntimeError("nginx not found
...")``, so a test can skip on it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

PAGE_SIZES = {"/1k": 1024, "/2k": 2048, "/4k": 4096}
DEBIAN_BINARY = "/usr/sbin/nginx"
# Debian's echo module (libnginx-mod-http-echo, a dependency of nginx-light): ``delayed`` paths.
ECHO_MODULE = "/usr/lib/nginx/modules/ngx_http_echo_module.so"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
PORT_ATTEMPTS = 3


def page_bytes(size: int) -> bytes:
    """The body of a page of exactly ``size`` bytes (the same text the test servers serve)."""
    line = b"tollgate test page " * 8
    return (line * (size // len(line) + 1))[:size]


def free_port() -> int:
    """A loopback port that was free a moment ago (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_binary() -> str | None:
    """The nginx binary: on PATH, else Debian's ``/usr/sbin/nginx`` (not on a normal user's PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return DEBIAN_BINARY if os.access(DEBIAN_BINARY, os.X_OK) else None


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _serves(port: int, path: str) -> bool:
    """Whether a worker answers on the plain port (the master listens before workers accept)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            return s.recv(16).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _kill_group(proc: subprocess.Popen) -> None:
    """Last resort (and finalizer): SIGKILL nginx's whole process group, then reap the master.

    Only while the master is alive, so the group id cannot belong to anything else yet.
    """
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT_S)


def _child_pids(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc (the ``children`` file, else a scan of every stat)."""
    children: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            children.extend(int(p) for p in text.split())
        return sorted(set(children))
    except (OSError, ValueError):
        pass
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)


class Nginx:
    """nginx on 127.0.0.1 with a plain and a TLS port; ``start()``/``stop()`` or a ``with`` block."""

    def __init__(
        self,
        worker_processes: int = 1,
        *,
        key_type: str = "rsa",
        key_bits: int = 2048,
        binary: str | None = None,
        cpus: Iterable[int] | None = None,
        tls_protocols: str = "TLSv1.2 TLSv1.3",
        extra_key_types: Iterable[str] = (),
        ssl_conf_command: str = "",
        access_log_format: str = "",
        keepalive_requests: int = 100_000,
        client_ca_pem: str = "",
        verify_client: str = "on",
        http2: bool = False,
        http2_max_concurrent_streams: int | None = None,
        session_resumption: bool = True,
        delayed: dict[str, float] | None = None,
    ) -> None:
        if worker_processes < 1:
            raise ValueError("worker_processes must be at least 1")
        found = binary or find_binary()
        if not found or not os.access(found, os.X_OK):
            raise RuntimeError(
                f"nginx not found (looked on PATH and at {DEBIAN_BINARY}); install Debian's nginx package"
            )
        self.binary = found
        self.worker_processes = worker_processes
        self.key_type = key_type
        self.key_bits = key_bits
        # CPUs to pin the master and its workers to (None: wherever the scheduler likes).
        self.cpus = frozenset(cpus) if cpus is not None else None
        # nginx's ssl_protocols, e.g. "TLSv1.2" to test what only TLS 1.2 has (session IDs).
        self.tls_protocols = tls_protocols
        # More certificates beside the first (e.g. ("ec",) to serve RSA and ECDSA: OpenSSL picks by
        # the client's cipher suites and signature algorithms).
        self.extra_key_types = tuple(extra_key_types)
        self.extra_certs: list[tuple[Path, Path]] = []
        # nginx's ssl_conf_command, e.g. "Groups X25519:prime256v1" to limit the key exchange.
        self.ssl_conf_command = ssl_conf_command
        # An access log (``access_log_lines()``) in this format, e.g. "$ssl_protocol $ssl_curve": what
        # the server saw per request. Empty: no access log (it costs server CPU).
        self.access_log_format = access_log_format
        # nginx's keepalive_requests: the answer to the N-th request on a connection closes it.
        self.keepalive_requests = keepalive_requests
        # Mutual TLS: the CA (PEM) client certificates must chain to, and nginx's ssl_verify_client
        # ("on": required, "optional": asked for, not required). Empty: no client certificate asked.
        self.client_ca_pem = client_ca_pem
        self.verify_client = verify_client
        # HTTP/2 on the TLS port (``listen … ssl http2``: nginx 1.22 has no ``http2 on``) and HTTP/2 with
        # prior knowledge on a third port (``h2c_url``); nginx's default limit is 128 streams.
        self.http2 = http2
        self.http2_max_concurrent_streams = http2_max_concurrent_streams
        # False: no session tickets and no session cache, so no session ever resumes.
        self.session_resumption = session_resumption
        # Paths answered only after so many seconds (the echo module's ``echo_sleep``), on every port:
        # requests that stay in flight long enough for the access log to show them overlapping.
        self.delayed = dict(delayed or {})
        self.h2c_port = 0
        self.plain_port = 0
        self.tls_port = 0
        self.directory: Path | None = None
        self.cert_path: Path | None = None
        self.key_path: Path | None = None
        self._tempdir: tempfile.TemporaryDirectory | None = None
        self._proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Nginx:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Nginx:
        """Write the site, start nginx and return once both ports accept and a worker answers."""
        if self._proc is not None:
            raise RuntimeError("nginx is already started")
        from portal.lib.tls.certs import make_self_signed

        self._tempdir = tempfile.TemporaryDirectory(prefix="tollgate-nginx-")
        self.directory = Path(self._tempdir.name)
        try:
            root = self.directory / "html"
            root.mkdir()
            (self.directory / "tmp").mkdir()
            for path, size in PAGE_SIZES.items():
                (root / path.lstrip("/")).write_bytes(page_bytes(size))
            self.cert_path, self.key_path = make_self_signed(
                self.directory / "tls", name="nginx", key_type=self.key_type, key_bits=self.key_bits
            )
            self.extra_certs = [
                make_self_signed(
                    self.directory / "tls", name=f"nginx-{kind}", key_type=kind, key_bits=self.key_bits
                )
                for kind in self.extra_key_types
            ]
            last_error = ""
            for _attempt in range(PORT_ATTEMPTS):
                # Another process may take a port between our probe and nginx's bind: try again.
                last_error = self._launch()
                if not last_error:
                    return self
            raise RuntimeError(f"nginx did not start: {last_error}")
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> str:
        """One start attempt on fresh ports; an empty string on success, else why it failed."""
        assert self.directory is not None
        self.plain_port = free_port()
        self.tls_port = free_port()
        while self.tls_port == self.plain_port:
            self.tls_port = free_port()
        if self.http2:
            self.h2c_port = free_port()
            while self.h2c_port in (self.plain_port, self.tls_port):
                self.h2c_port = free_port()
        conf = self.directory / "nginx.conf"
        conf.write_text(self.config_text())
        error_log = self.directory / "error.log"
        proc = subprocess.Popen(
            [self.binary, "-p", str(self.directory), "-c", str(conf), "-e", str(error_log)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._proc = proc
        self._finalizer = weakref.finalize(self, _kill_group, proc)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                self._forget()
                return f"exit code {proc.returncode}: {stderr.strip() or self._error_log_tail()}"
            if _accepts(self.plain_port) and _accepts(self.tls_port) and _serves(self.plain_port, "/1k"):
                if self.cpus is not None:
                    # Workers respawned later inherit the master's affinity.
                    for pid in self.pids():
                        os.sched_setaffinity(pid, self.cpus)
                return ""
            time.sleep(0.02)
        self._terminate()
        return f"ports not accepting within {START_TIMEOUT_S:.0f} s: {self._error_log_tail()}"

    def _error_log_tail(self) -> str:
        try:
            return (self.directory / "error.log").read_text(errors="replace")[-800:].strip()
        except (OSError, TypeError):
            return ""

    def _forget(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None
        self._finalizer = None

    def stop(self) -> None:
        """Stop nginx (SIGTERM: fast shutdown, then SIGKILL to the group if it hangs); remove the dir."""
        self._terminate()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            # SIGTERM is nginx's fast shutdown: the master exits after its workers have.
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_TIMEOUT_S)
        _kill_group(proc)
        self._forget()

    # -- configuration -----------------------------------------------------------------------

    def config_text(self) -> str:
        d = self.directory
        user = "user root;\n" if os.geteuid() == 0 else ""
        extra = "".join(
            f"    ssl_certificate {cert};\n    ssl_certificate_key {key};\n" for cert, key in self.extra_certs
        )
        if self.ssl_conf_command:
            extra += f"    ssl_conf_command {self.ssl_conf_command};\n"
        if self.client_ca_pem:
            ca = d / "tls" / "client-ca.crt"
            ca.write_text(self.client_ca_pem)
            extra += f"    ssl_client_certificate {ca};\n    ssl_verify_client {self.verify_client};\n"
        h2 = " http2" if self.http2 else ""
        delayed = "".join(
            f"        location = {path} {{\n"
            f"            echo_sleep {seconds:g};\n"
            "            echo delayed;\n"
            "        }\n"
            for path, seconds in self.delayed.items()
        )
        load_modules = f"load_module {ECHO_MODULE};\n" if self.delayed else ""
        h2c = ""
        if self.http2:
            # Its own server with sendfile off: nginx 1.22 sends an h2c answer's DATA by sendfile after
            # its HEADERS frame, two small writes that Nagle and the client's delayed ACK hold ~40 ms
            # apart (h2load sees the same). Over TLS nothing is sent by sendfile anyway.
            h2c = f"""
    server {{
        listen 127.0.0.1:{self.h2c_port} http2;
        server_name localhost;
        root {d}/html;
        sendfile off;
        location / {{
            try_files $uri =404;
        }}
{delayed}    }}
"""
        if self.http2_max_concurrent_streams is not None:
            extra += f"    http2_max_concurrent_streams {self.http2_max_concurrent_streams};\n"
        resumption = (
            "    ssl_session_cache shared:TOLLGATE:10m;\n"
            "    ssl_session_timeout 10m;\n"
            "    ssl_session_tickets on;"
            if self.session_resumption
            else "    ssl_session_cache off;\n    ssl_session_tickets off;"
        )
        access_log = "access_log off;"
        if self.access_log_format:
            access_log = (
                f"log_format tollgate '{self.access_log_format}';\n    access_log {d}/access.log tollgate;"
            )
        return f"""# Written by bench/nginx.py for one benchmark or test; removed when it stops.
{load_modules}{user}worker_processes {self.worker_processes};
daemon off;
master_process on;
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections 4096;
}}

http {{
    {access_log}
    default_type text/html;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay on;
    server_tokens off;
    keepalive_timeout 65s;
    keepalive_requests {self.keepalive_requests};

    client_body_temp_path {d}/tmp/client_body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;

    ssl_certificate {self.cert_path};
    ssl_certificate_key {self.key_path};
{extra}    ssl_protocols {self.tls_protocols};
{resumption}

    server {{
        listen 127.0.0.1:{self.plain_port};
        listen 127.0.0.1:{self.tls_port} ssl{h2};
        server_name localhost;
        root {d}/html;
        location / {{
            try_files $uri =404;
        }}
{delayed}    }}
{h2c}}}
"""

    # -- addresses and processes -------------------------------------------------------------

    def plain_url(self, path: str = "/1k") -> str:
        return f"http://127.0.0.1:{self.plain_port}{path}"

    def tls_url(self, path: str = "/1k") -> str:
        return f"https://127.0.0.1:{self.tls_port}{path}"

    def h2c_url(self, path: str = "/1k") -> str:
        """HTTP/2 over plain TCP with prior knowledge (``http2``): a port of its own in nginx."""
        return f"http://127.0.0.1:{self.h2c_port}{path}"

    def access_log_lines(self) -> list[str]:
        """The access log's lines so far (``access_log_format``); nginx writes each as it answers."""
        try:
            return (self.directory / "access.log").read_text().splitlines()
        except (OSError, TypeError):
            return []

    def pids(self) -> list[int]:
        """The master's pid followed by its workers' (empty when not running)."""
        if not self.running:
            return []
        assert self._proc is not None
        return [self._proc.pid, *_child_pids(self._proc.pid)]
