"""An HTTP/3 arm's ``result.quic`` (docs/engine-protocol.md, "HTTP/3"): what its QUIC connections
negotiated and what they put on the wire, over the measured window only.

Two kinds of figures, both windowed:

* per connection whose handshake completed in the window (counted from the request that opened it,
  as ``connections_opened`` is: a request that started in the window and ended before it closed):
  ``connections``, ``versions``, ``alpn``, ``groups``, ``ciphers``, ``resumed``, ``retry``,
  ``version_negotiation``, ``early_data``, the first flight's largest size, the handshakes' bytes;
  and per request ``streams_reset`` (the server reset its stream);
* the wire counters (datagrams and bytes each way, packets lost, probe timeouts) as window-edge
  differences: the sum over every connection of the arm, closed or still open, read when the window
  opens and when it closes (a kept ``h3`` connection opened in the warm-up counts only what it sent
  and received in the window); and ``closed_by_server``, the connections the server (or the path:
  an idle timeout) ended in the window, by the words of the reason.

The clients tell it about every connection as it opens and ends (``opened``, ``ended``: the
``H3Client`` hooks); the recorder hands it each windowed sample (``note``)."""

from __future__ import annotations

from workers.engine.http.http3.state import H3Sample, QuicFacts

WIRE = ("datagrams_sent", "datagrams_received", "bytes_sent", "bytes_received", "packets_lost", "pto_count")
RESET_ERRORS = ("stream_reset", "refused_stream")
# A connection's end (``QuicFacts.end``: the error's type and words) that the server or the path chose.
SERVER_ENDS = ("QuicClosed", "GoAway")


def _count(counts: dict, key) -> None:
    counts[key] = counts.get(key, 0) + 1


class QuicTally:
    """One HTTP/3 arm's QUIC figures; ``port``, ``discovered_by``, ``alt_svc``: the preflight's
    discovery (``workers.engine.preflight``)."""

    def __init__(self, port: int, discovered_by: str = "url", alt_svc: str | None = None) -> None:
        self.port, self.discovered_by, self.alt_svc = port, discovered_by, alt_svc
        self.live: dict[int, object] = {}  # id(facts) -> the open connection (its Driver)
        self.ended_totals = dict.fromkeys(WIRE, 0)  # of the connections already ended
        self.at_open: dict[str, int] | None = None
        self.at_close: dict[str, int] | None = None
        self.connections = 0
        self.resumed = self.retry = self.version_negotiation = 0
        self.first_flight_bytes_max = self.first_flight_datagrams_max = 0
        self.handshake_bytes_sent = self.handshake_bytes_received = 0
        self.streams_reset = 0
        self.versions: dict[str, int] = {}
        self.alpn: dict[str, int] = {}
        self.groups: dict[str, int] = {}
        self.ciphers: dict[str, int] = {}
        self.early_data = {"accepted": 0, "refused": 0, "no_ticket": 0}
        self.closed_by_server: dict[str, int] = {}

    # -- the clients' hooks ------------------------------------------------------------------------

    def opened(self, conn) -> None:
        """A connection of the arm exists (``H3Client.on_connection_open``: its ``Driver``)."""
        self.live[id(conn.facts)] = conn

    def ended(self, facts: QuicFacts) -> None:
        """A connection ended, its counters final (``H3Client.on_connection_end``)."""
        self.live.pop(id(facts), None)
        totals = self.ended_totals
        for key in WIRE:
            totals[key] += getattr(facts, key)
        if self.at_open is not None and self.at_close is None and facts.end:
            kind, _, words = facts.end.partition(": ")
            if kind in SERVER_ENDS:
                _count(self.closed_by_server, words or kind)

    def wire(self) -> dict[str, int]:
        """Every connection's wire counters so far, the open ones' read now."""
        out = dict(self.ended_totals)
        for conn in list(self.live.values()):
            conn.count_recovery()
            facts = conn.facts
            for key in WIRE:
                out[key] += getattr(facts, key)
        return out

    # -- the window --------------------------------------------------------------------------------

    def start_window(self) -> None:
        self.at_open = self.wire()

    def close_window(self) -> None:
        if self.at_close is None:
            self.at_close = self.wire()

    def note(self, sample: H3Sample) -> None:
        """A request in the window: its connection's handshake facts when it opened one."""
        if sample.error in RESET_ERRORS:
            self.streams_reset += 1
        facts = sample.quic
        if facts is None or facts.handshake_us is None:
            return
        self.connections += 1
        _count(self.versions, _version_key(facts.version))
        _count(self.alpn, facts.alpn or "")
        _count(self.groups, facts.group or "")
        _count(self.ciphers, facts.cipher or "")
        self.resumed += bool(facts.session_resumed)
        self.retry += facts.retry
        self.version_negotiation += facts.version_negotiation
        if facts.early_data in self.early_data:
            self.early_data[facts.early_data] += 1
        self.first_flight_bytes_max = max(self.first_flight_bytes_max, facts.first_flight_bytes)
        self.first_flight_datagrams_max = max(self.first_flight_datagrams_max, facts.first_flight_datagrams)
        self.handshake_bytes_sent += facts.handshake_bytes_sent
        self.handshake_bytes_received += facts.handshake_bytes_received

    def result(self) -> dict:
        """``result.quic``: the contract's keys."""
        start = self.at_open or dict.fromkeys(WIRE, 0)
        end = self.at_close or (self.wire() if self.at_open is not None else start)
        return {
            "port": self.port,
            "discovered_by": self.discovered_by,
            "alt_svc": self.alt_svc,
            "connections": self.connections,
            "versions": dict(self.versions),
            "alpn": dict(self.alpn),
            "groups": dict(self.groups),
            "ciphers": dict(self.ciphers),
            "resumed": self.resumed,
            "retry": self.retry,
            "version_negotiation": self.version_negotiation,
            "early_data": dict(self.early_data),
            **{key: end[key] - start[key] for key in WIRE},
            "first_flight_bytes_max": self.first_flight_bytes_max,
            "first_flight_datagrams_max": self.first_flight_datagrams_max,
            "handshake_bytes_sent": self.handshake_bytes_sent,
            "handshake_bytes_received": self.handshake_bytes_received,
            "streams_reset": self.streams_reset,
            "closed_by_server": dict(self.closed_by_server),
        }


def _version_key(name: str | None) -> str:
    """The contract's version key: "1", "2" (the facts say QUICv1, QUICv2, or a code point in hex)."""
    if not name:
        return ""
    return name.removeprefix("QUICv")


def tally_for(found: dict | None) -> QuicTally | None:
    """An arm's tally from its preflight's discovery (``Prepared.quic``); None for a non-HTTP/3 arm."""
    if not found:
        return None
    return QuicTally(found["port"], found.get("discovered_by") or "url", found.get("alt_svc"))
