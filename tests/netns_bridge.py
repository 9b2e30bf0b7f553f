"""A network namespace for a test's "other host", reached only through forwarders the test opens.

The namespace has nothing but its own loopback. ``Bridge.forward(port)`` opens a listener on the
namespace's 127.0.0.1:port (created by a thread that entered the namespace with setns(2): a socket
stays in the namespace it was created in) and relays each connection to 127.0.0.1:port of the test's
own namespace. So the other host reaches exactly the ports the test chose (broker, master, target),
only over loopback addresses, and nothing else of this machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
import threading

CLONE_NEWNET = 0x40000000


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603


class Unavailable(Exception):
    pass


class Bridge:
    def __init__(self, name: str) -> None:
        self.name = name
        self.listeners: list[socket.socket] = []
        self.open = True

    def __enter__(self) -> Bridge:
        ip = shutil.which("ip")
        if not ip:
            raise Unavailable("the ip tool (iproute2) is not installed")
        made = _run(ip, "netns", "add", self.name)
        if made.returncode:
            raise Unavailable(f"cannot make a network namespace: {made.stderr.strip()}")
        up = _run(ip, "netns", "exec", self.name, ip, "link", "set", "lo", "up")
        if up.returncode:
            self.__exit__()
            raise Unavailable(f"cannot bring the namespace's loopback up: {up.stderr.strip()}")
        return self

    def __exit__(self, *exc) -> None:
        self.open = False
        for listener in self.listeners:
            with contextlib.suppress(OSError):
                listener.close()
        _run("ip", "netns", "del", self.name)

    def command(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def _listener_inside(self, port: int) -> socket.socket:
        made: dict = {}

        def inside() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                made["socket"] = socket.create_server(("127.0.0.1", port))
            except OSError as exc:
                made["error"] = exc

        thread = threading.Thread(target=inside)  # ends after: only it ever entered the namespace
        thread.start()
        thread.join()
        if "error" in made:
            raise Unavailable(f"cannot listen inside the namespace: {made['error']}")
        return made["socket"]

    def forward(self, port: int) -> None:
        listener = self._listener_inside(port)
        self.listeners.append(listener)
        threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while self.open:
            try:
                inner, _ = listener.accept()
                outer = socket.create_connection(("127.0.0.1", port))
            except OSError:
                return
            for a, b in ((inner, outer), (outer, inner)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
