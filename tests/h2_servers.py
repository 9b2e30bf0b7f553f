"""A small HTTP/2 test server of our own (the ``h2`` package, server side, over TLS with ALPN h2): it
answers ``goaway_after`` streams per connection with a 1 KB page, then sends GOAWAY (NO_ERROR, last
stream id the last one it answered) and closes. It logs what it served, per connection: the protocol
ALPN selected, the streams it answered and the last request's header fields — the server's own
account a test checks the client by.

It is ``h2``, not the engine's ``jh2``: another implementation (``h2``'s own validation of what it
receives on), so the client's codec does not test itself. ``h2`` is a test requirement
(requirements-dev.txt)."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import h2.config
import h2.connection
import h2.events

from portal.lib.tls.certs import make_self_signed

PAGE = b"x" * 1024


class GoAwayServer:
    def __init__(
        self,
        directory: Path,
        goaway_after: int = 3,
        server: str | None = None,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        """``server``: the ``server`` header of every answer (None: none sent); ``extra``: header
        fields added to every answer as given, unchecked (to send a malformed header block)."""
        cert, key = make_self_signed(directory, name="h2")
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2"])
        self.goaway_after = goaway_after
        self.server = server
        self.extra = extra or []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)  # accept() wakes up to see the stop
        self._stop = threading.Event()
        self.port = self.listener.getsockname()[1]
        self.log: list[dict] = []  # one per connection: {"alpn", "streams", "request_headers"}
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, path: str = "/1k") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> GoAwayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(5.0)
            threading.Thread(target=self._connection, args=(raw,), daemon=True).start()

    def _connection(self, raw: socket.socket) -> None:
        entry = {"alpn": None, "streams": 0, "request_headers": None}
        try:
            sock = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        entry["alpn"] = sock.selected_alpn_protocol()
        self.log.append(entry)
        # With ``extra``, sent as given: h2's outbound checks would refuse a malformed block.
        checked = not self.extra
        config = h2.config.H2Configuration(
            client_side=False, validate_outbound_headers=checked, normalize_outbound_headers=checked
        )
        conn = h2.connection.H2Connection(config)
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        with sock:
            while entry["streams"] < self.goaway_after:
                data = sock.recv(65536)
                if not data:
                    return
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived) and entry["streams"] < self.goaway_after:
                        entry["streams"] += 1
                        entry["request_headers"] = [(bytes(n), bytes(v)) for n, v in event.headers]
                        headers = [
                            (":status", "200"),
                            ("content-type", "text/plain"),
                            ("content-length", "1024"),
                        ]
                        if self.server is not None:
                            headers.append(("server", self.server))
                        headers += self.extra
                        conn.send_headers(event.stream_id, headers)
                        conn.send_data(event.stream_id, PAGE, end_stream=True)
                        last = event.stream_id
                sock.sendall(conn.data_to_send())
            conn.close_connection(last_stream_id=last)
            sock.sendall(conn.data_to_send())
