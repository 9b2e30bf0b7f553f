"""What the HTTP/3 client asks of ``qh3`` beyond its public API, in one place: the key-exchange groups
a connection offers and the one the server chose, and what a QUIC packet's first bytes say.

``qh3`` (PyPI; sans-I/O QUIC and HTTP/3 with a compiled core; X25519MLKEM768 offered by default)
has no public way to choose or read the TLS key-exchange group. Its client builds the ClientHello
from ``tls.Context._supported_groups`` in ``QuicTlsBridge.start()``, which ``QuicConnection.connect``
calls right after ``QuicConnection._create_tls`` made the bridge. ``Connection`` (a subclass) overrides
``_create_tls``: the groups are set on the new context before its ClientHello exists, the
context's ``_client_handle_hello`` (the one place a ServerHello is read) is wrapped per connection to
read the server's ``key_share``, and for an IP literal its ``_client_send_hello`` builds the
ClientHello with ``_server_name`` unset (qh3 would send the address as SNI; the certificate is still
checked against it). A Retry or a version negotiation makes a new bridge through the same
method, so the hook holds for those too. Everything else the client uses is public (configuration,
``connect``, ``datagrams_to_send``, ``receive_datagram``, ``get_timer``, ``handle_timer``,
``next_event``, the session-ticket handler, ``H3Connection``), except the loss-recovery counters of
the connection's core (``QuicConnection._core``: ``loss_total``, ``pto_total``), which qh3 keeps
there and nowhere else.

Checked on ``PRIVATE_API_CHECKED_ON``: tests/workers/test_http3_private_api.py fails on another qh3
version until this module has been checked again and the pin moved.

The QUIC version, a Retry and a version negotiation are read from the datagrams themselves (RFC 8999,
RFC 9000 §17.2, RFC 9369 §3.2), where no library can hide them: ``long_header``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass

from qh3 import tls as qh3_tls
from qh3.quic.configuration import QuicConfiguration
from qh3.quic.connection import QuicConnection

PRIVATE_API_CHECKED_ON = {"qh3": "2.1"}
ALPN = "h3"
MAX_EARLY_DATA = 0xFFFFFFFF  # what QUIC's session tickets carry when they allow 0-RTT (RFC 9001 §4.6.1)

# The groups qh3's client can offer, by the names OpenSSL prints (``handshake_log.GROUP_IDS``, the TLS
# matrix's names): the X25519 family always carries a key share; a P-curve carries one only when no
# X25519 group is offered (``offer_ec_key_shares``), else the server would need a HelloRetryRequest.
GROUPS = {
    "X25519MLKEM768": int(qh3_tls.Group.X25519ML768),
    "x25519": int(qh3_tls.Group.X25519),
    "secp256r1": int(qh3_tls.Group.SECP256R1),
    "secp384r1": int(qh3_tls.Group.SECP384R1),
    "secp521r1": int(qh3_tls.Group.SECP521R1),
}
GROUP_NAMES = {code: name for name, code in GROUPS.items()}
_SHARED = {GROUPS["X25519MLKEM768"], GROUPS["x25519"]}
VERSION_NAMES = {0x00000001: "QUICv1", 0x6B3343CF: "QUICv2"}
_V2 = 0x6B3343CF


def group_codes(names: tuple[str, ...] | list[str]) -> tuple[int, ...]:
    """The code points of group names (case does not matter); a name qh3 cannot offer is refused."""
    folded = {name.lower(): code for name, code in GROUPS.items()}
    codes = []
    for name in names:
        code = folded.get(name.lower())
        if code is None:
            known = ", ".join(GROUPS)
            raise ValueError(f"the HTTP/3 client (qh3) cannot offer the group {name!r}: it offers {known}")
        codes.append(code)
    if not codes:
        raise ValueError("offer at least one key-exchange group")
    return tuple(codes)


@dataclass(frozen=True)
class QuicSettings:
    """An arm's QUIC client settings, made once (``make_settings``); each connection gets its own
    ``QuicConfiguration`` from them (``configuration``), with the session ticket it offers.

    ``groups``: the key-exchange groups offered, most preferred first (empty: qh3's default,
    X25519MLKEM768 and X25519 with key shares, P-256 and P-384 without). ``cadata``: the CA
    certificates (PEM) that verification trusts, read once (a self-signed leaf may be its own anchor:
    qh3 2.1 accepts the one the server presents, tests/workers/test_http3_client.py).
    """

    verify: bool = False
    cadata: bytes | None = None
    groups: tuple[int, ...] = ()
    idle_timeout_s: float = 30.0
    versions: tuple[int, ...] = (0x00000001,)  # QUIC versions offered, preferred first (v1; v2: 0x6B3343CF)

    def configuration(self, server_name: str, ticket: qh3_tls.SessionTicket | None) -> QuicConfiguration:
        config = QuicConfiguration(
            is_client=True,
            alpn_protocols=[ALPN],
            server_name=server_name,
            idle_timeout=self.idle_timeout_s,
            verify_mode=None if self.verify else 0,  # None: qh3's default, CERT_REQUIRED
            verify_hostname=self.verify,
            offer_ec_key_shares=bool(self.groups) and not (_SHARED & set(self.groups)),
        )
        if self.verify and self.cadata:
            config.cadata = self.cadata
        config.supported_versions = list(self.versions)
        config.session_ticket = ticket
        return config


def make_settings(
    verify: bool,
    cafile: str | None = None,
    groups: tuple[str, ...] | list[str] = (),
    idle_timeout_s: float = 30.0,
) -> QuicSettings:
    """The arm's QUIC settings, as ``tlslib.make_context`` makes its TLS context: with ``verify``, the
    CA bundle ``cafile`` (else the system's) and the host name or IP address checked."""
    cadata = None
    if verify and cafile:
        with open(cafile, "rb") as f:
            cadata = f.read()
    return QuicSettings(verify, cadata, group_codes(groups) if groups else (), idle_timeout_s)


def without_early_data(ticket: qh3_tls.SessionTicket) -> qh3_tls.SessionTicket:
    """The ticket as one that allows no 0-RTT: offering it resumes the session and offers no early data
    (``h3_resumed``: a resumption, the request sent after the handshake)."""
    if ticket.max_early_data_size is None:
        return ticket
    return dataclasses.replace(ticket, max_early_data_size=None)


def allows_early_data(ticket: qh3_tls.SessionTicket | None) -> bool:
    return ticket is not None and ticket.max_early_data_size == MAX_EARLY_DATA


class Connection(QuicConnection):
    """A client ``QuicConnection`` that offers ``groups`` (empty: qh3's default) and records the group
    the server's ServerHello chose (``group``, a code point; the last ServerHello's after a
    HelloRetryRequest)."""

    def __init__(self, *, configuration: QuicConfiguration, groups: tuple[int, ...] = (), **kwargs) -> None:
        super().__init__(configuration=configuration, **kwargs)
        self.offered_groups = groups
        self.group: int | None = None
        # No SNI for an IP literal (RFC 6066 §3), as the TCP clients' ``ssl`` does; the address is still
        # what the certificate is checked against, and what a session ticket is kept for.
        self.sni = not _is_ip(configuration.server_name)

    def _create_tls(self, remote_source_cid):
        bridge = super()._create_tls(remote_source_cid)
        context = bridge.tls
        if self.offered_groups:
            # GREASE (RFC 8701) stays first, as qh3 sends it by default: only the real groups change.
            grease = [g for g in context._supported_groups if _is_grease(g)]
            context._supported_groups = [*grease, *self.offered_groups]
        handle_hello = context._client_handle_hello

        def read_hello(input_buf, output_buf) -> None:
            message = input_buf.data_slice(0, input_buf.capacity)
            handle_hello(input_buf, output_buf)
            found = server_hello_group(message)
            if found is not None:
                self.group = found

        context._client_handle_hello = read_hello
        if not self.sni:
            send_hello = context._client_send_hello

            def send_hello_without_sni(output_buf) -> None:
                name, context._server_name = context._server_name, None
                try:
                    send_hello(output_buf)
                finally:
                    context._server_name = name

            context._client_send_hello = send_hello_without_sni
        return bridge


def _is_ip(name: str | None) -> bool:
    try:
        ipaddress.ip_address(name or "")
    except ValueError:
        return False
    return True


def _is_grease(value: int) -> bool:
    """A GREASE value (RFC 8701): 0x0A0A, 0x1A1A, … 0xFAFA."""
    return (value & 0x0F0F) == 0x0A0A and value >> 8 == value & 0xFF


def group_name(code: int | None) -> str | None:
    if code is None:
        return None
    return GROUP_NAMES.get(code, f"0x{code:04x}")


def server_hello_group(message: bytes) -> int | None:
    """The group of a TLS 1.3 ServerHello's (or HelloRetryRequest's) ``key_share``: handshake header
    (4), legacy_version (2), random (32), session id, cipher suite (2), compression (1), extensions."""
    pos = 4 + 2 + 32
    if len(message) < pos + 1:
        return None
    pos += 1 + message[pos] + 2 + 1
    if len(message) < pos + 2:
        return None
    end = min(len(message), pos + 2 + int.from_bytes(message[pos : pos + 2], "big"))
    pos += 2
    while pos + 4 <= end:
        kind = int.from_bytes(message[pos : pos + 2], "big")
        size = int.from_bytes(message[pos + 2 : pos + 4], "big")
        if kind == 0x0033 and size >= 2:  # key_share: the server's group first
            return int.from_bytes(message[pos + 4 : pos + 6], "big")
        pos += 4 + size
    return None


def long_header(datagram: bytes) -> tuple[int, str] | None:
    """(version, kind) of a datagram's first packet when it has a long header (the handshake's), else
    None: ``kind`` is ``version_negotiation`` (version 0), ``retry`` (v1 type 3, v2 type 0) or
    ``handshake`` (Initial, 0-RTT, Handshake)."""
    if len(datagram) < 5 or not datagram[0] & 0x80:
        return None
    version = int.from_bytes(datagram[1:5], "big")
    if version == 0:
        return 0, "version_negotiation"
    kind = (datagram[0] >> 4) & 0x03
    if (version == _V2 and kind == 0) or (version != _V2 and kind == 3):
        return version, "retry"
    return version, "handshake"


def version_name(version: int | None) -> str | None:
    if version is None:
        return None
    return VERSION_NAMES.get(version, f"0x{version:08x}")
