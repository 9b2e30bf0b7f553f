"""What the HTTP/3 client keeps: per QUIC connection its facts (``QuicFacts``), per request its answer
as it arrives (``Stream``), and the sample it returns (``H3Sample``: the timed client's ``Sample`` and
what only HTTP/3 has)."""

from __future__ import annotations

from dataclasses import dataclass

from workers.engine.http.http2_state import Stream  # one answer as it arrives: the same as HTTP/2's
from workers.engine.http.http3.errors import MalformedAnswer
from workers.engine.http.sample import Sample

BODY_KEPT_BYTES = 1024


@dataclass(slots=True)
class QuicFacts:
    """One QUIC connection, as a report needs it. The handshake's facts are final once it completed;
    the counters are final once ``closed`` (the client's ``on_connection_end`` gets every connection
    once, then).

    ``early_data``: ``accepted`` (the request went as 0-RTT early data and the server took it),
    ``refused`` (it went as early data, the server refused it and the library sent it again after the
    handshake: never a 0-RTT request), ``no_ticket`` (``h3_0rtt`` held no ticket allowing early data:
    a handshake first), None (early data not tried). Only ``accepted`` is 0-RTT.

    ``bytes_*`` and ``datagrams_*``: UDP payload as the socket sent and read it (add 28 bytes a datagram
    for IPv4 and UDP headers, 48 for IPv6); ``first_flight_*``: what the client sent before any answer
    (its Initial, padded to 1,200 bytes at least, and 0-RTT); ``handshake_bytes_*``: until the handshake
    completed. ``packets_lost``: packets qh3's loss recovery declared lost (their frames are sent
    again); ``pto_count``: its probe timeouts (each sends probe packets)."""

    handshake_us: int | None = None
    version: str | None = None
    group: str | None = None
    cipher: str | None = None
    alpn: str | None = None
    session_resumed: bool | None = None
    early_data: str | None = None
    retry: bool = False
    version_negotiation: bool = False
    port: int = 0
    first_flight_datagrams: int = 0
    first_flight_bytes: int = 0
    handshake_bytes_sent: int = 0
    handshake_bytes_received: int = 0
    datagrams_sent: int = 0
    datagrams_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    packets_lost: int = 0
    pto_count: int = 0
    probes_held: int = 0  # timeouts passed unfired while 0-RTT waited for keys (``Driver._hold_early_probe``)
    requests: int = 0
    closed: bool = False
    end: str | None = None  # why it ended when the client did not end it (the error's words)


_NOTED = {b"content-type", b"content-encoding", b"server", b"location"}


def read_head(stream: Stream, headers: list[tuple[bytes, bytes]]) -> None:
    for name, value in headers:
        if name == b":status":
            try:
                stream.status = int(value)
            except ValueError:
                raise MalformedAnswer(f"bad :status {value[:20]!r}") from None
        elif name in _NOTED:
            stream.headers[name.decode("latin-1")] = value.decode("latin-1")
    if stream.status is None:
        raise MalformedAnswer("an answer without :status")


@dataclass(slots=True)
class H3Sample(Sample):
    """One HTTP/3 request's outcome: a ``Sample`` (TTFB/TTLB, the handshake in ``tls_handshake_us``,
    ``session_reused``, ``alpn`` "h3") and

    * ``early_data``: whether it went as 0-RTT early data: ``accepted`` (the only 0-RTT request),
      ``refused`` or ``no_ticket`` (sent after a handshake), None (not tried: every mode but h3_0rtt);
      ``client.is_zero_rtt`` says it for a report;
    * ``quic``: on the request that opened a connection, that connection's ``QuicFacts`` (its counters
      final once it closed; every connection's final facts also go to ``on_connection_end``)."""

    early_data: str | None = None
    quic: QuicFacts | None = None
