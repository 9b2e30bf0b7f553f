"""A small HTTP/3 server on qh3's own asyncio server, in a thread, for what Caddy cannot be made to do:
a QUIC server that offers another protocol than h3 over ALPN, one that sends a Retry first, one that
speaks only QUIC version 2 (a version negotiation). It answers every GET with ``body`` and records
what it served (``served``: path, QUIC version, ALPN), its own account.

    with QuicServer(cert, retry=True) as server:
        ... https://127.0.0.1:{server.port}/1k over QUIC ...
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import TracebackType

from qh3.asyncio import QuicConnectionProtocol, serve
from qh3.h3 import events as h3_events
from qh3.h3.connection import H3Connection
from qh3.quic import events as quic_events
from qh3.quic.configuration import QuicConfiguration


class _Protocol(QuicConnectionProtocol):
    def __init__(self, *args, server: QuicServer, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._server = server
        self._h3: H3Connection | None = None

    def quic_event_received(self, event: quic_events.QuicEvent) -> None:
        if isinstance(event, quic_events.ProtocolNegotiated) and event.alpn_protocol == "h3":
            self._h3 = H3Connection(self._quic)
        if self._h3 is None:
            return
        for h3_event in self._h3.handle_event(event):
            if isinstance(h3_event, h3_events.HeadersReceived):
                path = dict(h3_event.headers).get(b":path", b"").decode()
                body = self._server.body
                self._h3.send_headers(
                    h3_event.stream_id,
                    [
                        (b":status", b"200"),
                        (b"content-type", b"text/plain"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                )
                self._h3.send_data(h3_event.stream_id, body, end_stream=True)
                self._server.served.append({"path": path, "version": self._quic._version, "alpn": "h3"})
        self.transmit()


class QuicServer:
    def __init__(
        self,
        cert: tuple[Path, Path],
        *,
        alpn: tuple[str, ...] = ("h3",),
        retry: bool = False,
        versions: tuple[int, ...] | None = None,
        body: bytes = b"q" * 1024,
    ) -> None:
        self.cert = cert
        self.alpn = alpn
        self.retry = retry
        self.versions = versions
        self.body = body
        self.port = 0
        self.served: list[dict] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def __enter__(self) -> QuicServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> QuicServer:
        self._thread = threading.Thread(target=self._run, name="quic-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the qh3 test server did not start")
        if self._error is not None:
            raise self._error
        return self

    def _configuration(self) -> QuicConfiguration:
        # Its HTTP/3 SETTINGS offer datagrams, which a client checks against this transport parameter.
        config = QuicConfiguration(
            is_client=False, alpn_protocols=list(self.alpn), max_datagram_frame_size=65536
        )
        config.load_cert_chain(str(self.cert[0]), str(self.cert[1]))
        if self.versions:
            config.supported_versions = list(self.versions)
        return config

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(
                serve(
                    "127.0.0.1",
                    0,
                    configuration=self._configuration(),
                    create_protocol=lambda *a, **k: _Protocol(*a, server=self, **k),
                    retry=self.retry,
                )
            )
            self.port = self._server._transport.get_extra_info("sockname")[1]
        except BaseException as exc:  # noqa: BLE001 - said to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        self._server.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
