"""Targets that fail on purpose, on loopback, for the reliability tests (issue 16): a server in a
process of its own that a test kills for real, one that starts resetting every connection when told
(counting each reset on the server side), one that accepts and never answers, and a TLS server that
answers its first connection only and stalls every later one.

``python -m tests.faulty_servers [CERT KEY]`` serves tests.servers' pages (TLS with a certificate)
on a free loopback port, prints the port and serves until it is killed.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.servers import LocalServer, _RawServer

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    """A ``LocalServer`` in a process of its own: ``kill`` is a real crash (SIGKILL), its listening
    socket and every open connection go at once and the port refuses from then on."""

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.tls = tls
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> ServerProcess:
        args = [str(path) for path in self.tls] if self.tls else []
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "tests.faulty_servers", *args],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.port = int(self.proc.stdout.readline())
        return self

    def url(self, path: str = "/1k") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class DyingServer(_RawServer):
    """Answers every connection with a 1 KB page until ``die()`` (or its ``die_after``-th answer);
    from then on resets each one at once (SO_LINGER 0), and remembers when (``resets``: monotonic
    times, counted by the server)."""

    def __init__(self, die_after: int = 0) -> None:
        super().__init__()
        self.die_after = die_after
        self.answered = 0
        self.dead_since: float | None = None
        self.resets: list[float] = []

    def die(self) -> float:
        self.dead_since = time.monotonic()
        return self.dead_since

    def handle(self, conn: socket.socket) -> None:
        if self.dead_since is None:
            self.answer(conn)
            self.answered += 1
            if self.answered == self.die_after:
                self.die()
            return
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.resets.append(time.monotonic())

    def resets_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.resets if start <= t < end)


class SilentServer:
    """Listens and never accepts: a connect completes (the kernel's backlog), the request is never
    answered, so a client waits for its own timeout."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]

    def url(self, path: str = "/1k", scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.sock.close()


class FirstOnlyTlsServer(_RawServer):
    """A TLS server that answers its first connection (the engine's preflight) and holds every later
    one open without a handshake: the TLS facts and the matrix's probing handshakes wait on it."""

    def __init__(self, tls: tuple[Path, Path]) -> None:
        super().__init__()
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(tls[0]), str(tls[1]))
        self.held: list[socket.socket] = []

    def url(self, path: str = "/1k") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            conn = self.accept()
            if conn is None:
                continue
            if self.held or self.stopping.is_set():
                self.held.append(conn)
                continue
            self.held.append(conn)
            try:
                with self.context.wrap_socket(conn, server_side=True) as tls:
                    self.answer(tls)
            except (ssl.SSLError, OSError):
                pass

    def stop(self) -> None:
        super().stop()
        for conn in self.held:
            conn.close()


if __name__ == "__main__":
    tls = (Path(sys.argv[1]), Path(sys.argv[2])) if len(sys.argv) > 2 else None
    server = LocalServer(tls=tls).start()
    print(server.port, flush=True)
    threading.Event().wait()
