"""Where an HTTP/3 arm's QUIC server is, found in the preflight before anything is measured, and why an
arm is refused when there is none (docs/engine-protocol.md, "HTTP/3").

The TLS URL's host and port over UDP first, at the endpoint's pinned address (the one the outbound
address policy checked: UDP goes where TCP goes, never to a name resolved here); when nothing answers
there, the UDP port the server names in its ``Alt-Svc`` header (``h3=":8443"``, same host only: another
host would be another address, unchecked), read from one HTTPS request over TCP to the same URL. That
header is recorded whatever the outcome (``alt_svc``), with which way the port was found
(``discovered_by``: ``url`` or ``alt-svc``).

A server without QUIC refuses every HTTP/3 arm within seconds, with the reason in words: nothing
listens on the UDP port (ICMP port unreachable, at once), no answer within ``HANDSHAKE_TIMEOUT_S``, or
a QUIC server that does not offer h3 over ALPN. Never measured over TCP instead. One discovery per
endpoint serves every HTTP/3 arm of a run (``found``)."""

from __future__ import annotations

import dataclasses
import re

from portal.lib.runs.protocol import EngineConfig
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
from workers.engine.http.http1 import TimedClient, parse_head
from workers.engine.http.http3.client import HANDSHAKE_TIMEOUT_S, H3Client
from workers.engine.http.http3.quic import QuicSettings, make_settings
from workers.engine.tls.libraries import run_context

ALT_SVC_PROBE_TIMEOUT_S = 3.0
ALT_SVC_CHARS = 300
NO_QUIC_ERRORS = ("connection_refused", "timeout")  # QuicRefused (ICMP), QuicNoAnswer
# ``h3=":8443"`` or ``h3="host:8443"`` in an Alt-Svc value (RFC 7838 §3): the h3 entries' authorities.
_H3_ENTRY = re.compile(r'(?:^|,)\s*h3\s*=\s*"([^"]*)"')


@dataclasses.dataclass(frozen=True)
class Found:
    """An endpoint's QUIC server: its UDP ``port``, how it was found, the Alt-Svc seen; or
    ``refusal``, why there is none (the reason's words after "<arm> refused: ")."""

    port: int
    discovered_by: str = "url"
    alt_svc: str | None = None
    refusal: str = ""

    def as_dict(self) -> dict:
        return {"port": self.port, "discovered_by": self.discovered_by, "alt_svc": self.alt_svc}


def quic_settings(config: EngineConfig, groups: tuple[str, ...] = ()) -> QuicSettings:
    """The run's QUIC settings for an HTTP/3 arm (the run's ``verify_tls``; ``groups``: a matrix
    variant's key-exchange group, else qh3's default offer, X25519MLKEM768 first)."""
    return make_settings(config.verify_tls, groups=groups)


def alt_svc_ports(alt_svc: str | None, port: int) -> list[int]:
    """The UDP ports an Alt-Svc value offers h3 on for the same host (other than ``port``), in order."""
    out: list[int] = []
    for authority in _H3_ENTRY.findall(alt_svc or ""):
        host, _, text = authority.rpartition(":")
        if host or not text.isdigit():  # another host: another address, which nothing checked
            continue
        found = int(text)
        if 0 < found < 65536 and found != port and found not in out:
            out.append(found)
    return out


def read_alt_svc(config: EngineConfig, endpoint: Endpoint, path: str, headers: dict[str, str]) -> str | None:
    """The ``Alt-Svc`` header of one HTTPS request over TCP to the arm's URL (None: none sent, or no
    answer over TCP within ``ALT_SVC_PROBE_TIMEOUT_S``)."""
    policy = ARM_POLICIES["tls_new"][1]
    client = _HeadKeeping(
        endpoint,
        policy,
        run_context(config),
        timeout_s=min(config.timeout_s, ALT_SVC_PROBE_TIMEOUT_S),
        headers=headers,
    )
    try:
        sample = client.request(path, path)
    finally:
        client.close()
    if sample.error is not None or sample.status is None:
        return None
    value = client.alt_svc
    if not value:
        return None
    return "".join(c if c.isprintable() else "?" for c in value.strip()[:ALT_SVC_CHARS])


class _HeadKeeping(TimedClient):
    """The HTTP/1.1 client, keeping the last answer's ``Alt-Svc`` header (``_HeadPeek``)."""

    alt_svc: str | None = None

    def _open(self, sample) -> None:
        super()._open(sample)
        self.sock = _HeadPeek(self.sock, self)


class _HeadPeek:
    """A socket that reads an answer's head as it passes (its ``Alt-Svc`` onto ``client``)."""

    def __init__(self, sock, client: _HeadKeeping) -> None:
        self._sock, self._client, self._head = sock, client, bytearray()

    def recv(self, size: int) -> bytes:
        data = self._sock.recv(size)
        head = self._head
        if b"\r\n\r\n" not in head and len(head) < 65536:
            head += data
            end = head.find(b"\r\n\r\n")
            if end >= 0:
                _, _, found = parse_head(bytes(head[:end]).decode("latin-1"))
                self._client.alt_svc = found.get("alt-svc")
        return data

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


def _probe(endpoint: Endpoint, settings: QuicSettings, port: int, path: str, config: EngineConfig, headers):
    """One HTTP/3 request on a new connection to ``port``: its sample."""
    client = H3Client(
        endpoint,
        ARM_POLICIES["h3_new"][1],
        settings,
        timeout_s=config.timeout_s,
        headers=headers,
        port=port,
        handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
    )
    try:
        return client.request(path, path)
    finally:
        client.close()


def _no_quic(port: int, sample) -> str:
    if sample.error == "connection_refused":
        return f"nothing listens on UDP port {port} (ICMP port unreachable: no QUIC there)"
    return f"no answer on UDP port {port} within {HANDSHAKE_TIMEOUT_S:g} s (no QUIC there)"


def discover(
    config: EngineConfig, endpoint: Endpoint, path: str, headers: dict[str, str], settings: QuicSettings
) -> Found:
    """The endpoint's QUIC server, or why there is none (``Found.refusal``)."""
    alt_svc = read_alt_svc(config, endpoint, path, headers)
    tried: list[str] = []
    candidates = [(endpoint.port, "url")] + [(p, "alt-svc") for p in alt_svc_ports(alt_svc, endpoint.port)]
    for port, way in candidates:
        sample = _probe(endpoint, settings, port, path, config, headers)
        if sample.error == "alpn_refused":
            detail = (sample.error_detail or "").partition(": ")[2]
            why = f"the server does not offer h3 over ALPN on UDP port {port}: {detail}"
            return Found(port, way, alt_svc, why)
        if sample.error in NO_QUIC_ERRORS and not _answered(sample):
            tried.append(_no_quic(port, sample))
            continue
        return Found(port, way, alt_svc)
    said = f"its Alt-Svc is {alt_svc!r}" if alt_svc else "it sends no Alt-Svc naming another UDP port for h3"
    if alt_svc and not alt_svc_ports(alt_svc, endpoint.port) and "h3" not in alt_svc:
        said = f"its Alt-Svc ({alt_svc!r}) offers no h3"
    return Found(endpoint.port, "url", alt_svc, "; ".join(tried) + f"; {said}")


def _answered(sample) -> bool:
    """Whether any datagram came back on the sample's connection (a QUIC server is there)."""
    facts = sample.quic
    return facts is not None and facts.datagrams_received > 0
