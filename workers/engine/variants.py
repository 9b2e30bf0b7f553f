"""The TLS configuration matrix on the generator side: one SSL context per variant, and one probing
handshake per variant that says whether the server (and this generator) accept it and what was
really negotiated — from the handshake itself, never assumed.

What Python's ``ssl`` (3.11, OpenSSL 3.0.x here) lets a client choose:

* protocol: ``minimum_version`` = ``maximum_version``;
* key-exchange group: ``set_ecdh_curve`` offers exactly one group (OpenSSL names ``X25519``,
  ``prime256v1``). OpenSSL 3.0 has no ML-KEM: X25519MLKEM768 is refused by the generator itself
  ("the generator's OpenSSL 3.0.x lacks X25519MLKEM768"). OpenSSL 3.5 has it, but ``set_ecdh_curve``
  takes only names with an OpenSSL object id, which the hybrid lacks: before Python 3.15's
  ``set_groups`` (used when present) the variant is refused saying Python's ssl cannot offer it
  (``group_refusal``); where it can be offered, a server that lacks it refuses the handshake;
* certificate type: in TLS 1.2 by cipher suites (``ECDHE-ECDSA-*`` or ``ECDHE-RSA-*``). Python has no
  API for TLS 1.3 signature algorithms, so in TLS 1.3 the server chooses; the probe reads the peer
  certificate's key type and a variant whose certificate is not the one asked for is refused;
* resumption: ``none`` (a full handshake per connection), ``ticket`` (the previous connection's
  session is offered), ``session_id`` (the same with ``OP_NO_TICKET``: TLS 1.2 only).

The negotiated group, the certificate chain and the size of the server's handshake flight are read
from the handshake messages through CPython's ``SSLContext._msg_callback`` hook (set only for the
probe, never under load).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time

from portal.lib import clientcerts, matrix
from portal.lib.protocol import ArmSpec
from workers.engine import mtls
from workers.engine.client import ARM_POLICIES, ConnectionPolicy, make_ssl_context
from workers.engine.tlsinfo import certificate_facts
from workers.engine.tlslib import SYSTEM, load_client_cert

OPENSSL_GROUPS = {"x25519": "X25519", "p256": "prime256v1", "x25519mlkem768": "X25519MLKEM768"}
GROUP_IDS = {
    0x0017: "p256",
    0x0018: "p384",
    0x0019: "p521",
    0x001D: "x25519",
    0x001E: "x448",
    0x11EC: "x25519mlkem768",
}
PROTOCOLS = {"tls1.2": ssl.TLSVersion.TLSv1_2, "tls1.3": ssl.TLSVersion.TLSv1_3}
NEGOTIATED_PROTOCOL = {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}
CERT_KEY_TYPES = {"rsa": "RSA", "ecdsa": "EC"}
TLS12_SUITES = {
    "ecdsa": "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305",
    "rsa": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305",
}
# The run chose the bundled library (pyOpenSSL): this generator cannot build its variants there yet.
BUNDLED_REFUSAL = (
    "the TLS matrix's variants are not available on the bundled TLS library (pyOpenSSL) yet: this "
    "generator builds them on Python's ssl only, and a run never mixes two libraries; run the matrix "
    "with the system TLS library (tls_library system)"
)
SERVER_HELLO, CERTIFICATE, SERVER_KEY_EXCHANGE = 2, 11, 12
KEY_SHARE, SUPPORTED_VERSIONS = 0x0033, 0x002B


class Refused(Exception):
    """The variant cannot be measured: the generator or the server refused it, or it negotiated
    something else than it asked for."""


def group_refusal(name: str, openssl_version: tuple, setter: str) -> str:
    """Who lacks the group: the generator's OpenSSL (ML-KEM hybrids came with 3.5), or, on a newer
    OpenSSL, Python's ssl API that cannot offer it."""
    short = f"{openssl_version[0]}.{openssl_version[1]}.x"
    if "MLKEM" in name and tuple(openssl_version[:2]) >= (3, 5):
        return (
            f"the generator's OpenSSL {short} has {name}, but Python's ssl cannot offer it "
            f"({setter} takes curve names only; set_groups came with Python 3.15)"
        )
    since = " (ML-KEM hybrids came with OpenSSL 3.5)" if "MLKEM" in name else ""
    return f"the generator's OpenSSL {short} lacks {name}{since}"


def build_context(variant: dict, verify: bool, client_certs: dict | None = None) -> ssl.SSLContext:
    """The variant's client context (shared by every connection of its sub-arm); ``client_certs``:
    the run's (``EngineConfig.client_certs``), for the ``client_cert`` dimension."""
    context = make_ssl_context(verify)
    add_client_cert(context, variant, client_certs)
    protocol = variant.get("protocol")
    if protocol:
        context.minimum_version = context.maximum_version = PROTOCOLS[protocol]
    group = variant.get("group")
    if group:
        # Python 3.15's set_groups takes any TLS group; set_ecdh_curve only names with an OpenSSL
        # object id, which the ML-KEM hybrids lack even where OpenSSL (3.5+) has them.
        setter = getattr(context, "set_groups", None) or context.set_ecdh_curve
        try:
            setter(OPENSSL_GROUPS[group])
        except (ValueError, ssl.SSLError) as exc:
            reason = group_refusal(OPENSSL_GROUPS[group], ssl.OPENSSL_VERSION_INFO, setter.__name__)
            raise Refused(f"{reason} ({ssl.OPENSSL_VERSION}: {exc})") from None
    cert = variant.get("cert")
    if cert and protocol != "tls1.3":
        context.set_ciphers(TLS12_SUITES[cert])  # TLS 1.2 only; TLS 1.3 suites are untouched
    if variant.get("resumption") == "session_id":
        context.options |= ssl.OP_NO_TICKET
    return context


def add_client_cert(context, variant: dict, client_certs: dict | None) -> None:
    """The ``client_cert`` variant's certificate on ``context`` (either TLS library); refused when the
    run holds none of that key type."""
    kind = variant.get("client_cert")
    if kind in (None, "none"):
        return
    pair = (client_certs or {}).get(kind)
    if not pair:
        raise Refused(
            f"the target holds no {kind.upper()} client certificate: {clientcerts.NO_CERTIFICATE_HINT}"
        )
    load_client_cert(context, pair)


def check_client_cert(variant: dict, messages: list) -> bool | None:
    """Whether the server asked for a client certificate (a CertificateRequest among the handshake's
    ``messages``, ``HandshakeLog.messages``); a variant presenting one is refused when it did not ask,
    or when none was sent."""
    log = mtls.Messages()
    log.seen = messages
    if variant.get("client_cert") in (None, "none"):
        return log.asked() if variant.get("client_cert") else None
    if not log.asked():
        raise Refused(mtls.NOT_ASKED.format(arm=matrix.variant_name(variant)))
    if not log.sent():
        raise Refused("the server asked for a client certificate but the generator sent none")
    return True


def policy(variant: dict, arm: str = matrix.MATRIX_ARM) -> ConnectionPolicy:
    """The sub-arm's connection policy: its arm's (keep-alive for ``tls``), resuming as the variant says."""
    return ConnectionPolicy(
        new_connection_per_request=ARM_POLICIES[arm][1].new_connection_per_request,
        resume_sessions=variant.get("resumption") in ("ticket", "session_id"),
    )


class HandshakeLog:
    """Collects the handshake messages of one connection (``SSLContext._msg_callback``)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, int, int, bytes]] = []

    def __call__(self, conn, direction, version, content_type, msg_type, data) -> None:
        self.messages.append((direction, int(content_type), int(msg_type), bytes(data)))

    def server_flight_bytes(self) -> int | None:
        """Bytes of the records the server sent in its first flight (after the ClientHello, before
        the client's next record): what the initial congestion window has to carry."""
        total, seen_read = 0, False
        for direction, content_type, _, data in self.messages:
            if content_type != 256:  # record headers only: 5 bytes, the last two the length
                continue
            if direction == "read":
                seen_read = True
                total += 5 + int.from_bytes(data[3:5], "big")
            elif seen_read:
                break
        return total or None

    def group(self) -> str | None:
        for direction, content_type, msg_type, data in self.messages:
            if direction != "read" or content_type != 22:
                continue
            if msg_type == SERVER_KEY_EXCHANGE and len(data) >= 7 and data[4] == 3:
                return _group_name(int.from_bytes(data[5:7], "big"))
            if msg_type == SERVER_HELLO:
                found = _key_share(data)
                if found is not None:
                    return _group_name(found)
        return None

    def chain(self) -> list[bytes]:
        """The certificates (DER) of the server's Certificate message, leaf first."""
        for direction, content_type, msg_type, data in self.messages:
            if direction == "read" and content_type == 22 and msg_type == CERTIFICATE:
                return _certificates(data)
        return []


def _group_name(code: int) -> str:
    return GROUP_IDS.get(code, f"0x{code:04x}")


def _extensions(body: bytes, pos: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    if pos + 2 > len(body):
        return out
    end = pos + 2 + int.from_bytes(body[pos : pos + 2], "big")
    pos += 2
    while pos + 4 <= end:
        ext_type = int.from_bytes(body[pos : pos + 2], "big")
        size = int.from_bytes(body[pos + 2 : pos + 4], "big")
        out[ext_type] = body[pos + 4 : pos + 4 + size]
        pos += 4 + size
    return out


def _key_share(message: bytes) -> int | None:
    """The group of a TLS 1.3 ServerHello's key_share (None in TLS 1.2 or when absent)."""
    body = message[4:]
    pos = 2 + 32  # legacy_version, random
    if len(body) < pos + 1:
        return None
    pos += 1 + body[pos]  # session id
    pos += 2 + 1  # cipher suite, compression
    share = _extensions(body, pos).get(KEY_SHARE)
    return int.from_bytes(share[:2], "big") if share and len(share) >= 2 else None


def _certificates(message: bytes) -> list[bytes]:
    body = message[4:]
    # TLS 1.2: a 3-byte list length over the rest; TLS 1.3: a request context comes first.
    tls13 = len(body) > 3 and int.from_bytes(body[0:3], "big") != len(body) - 3
    pos = 1 + body[0] if tls13 else 0  # TLS 1.3: certificate_request_context
    end = pos + 3 + int.from_bytes(body[pos : pos + 3], "big")
    pos += 3
    ders = []
    while pos + 3 <= end:
        size = int.from_bytes(body[pos : pos + 3], "big")
        ders.append(body[pos + 3 : pos + 3 + size])
        pos += 3 + size
        if tls13:
            pos += 2 + int.from_bytes(body[pos : pos + 2], "big")  # per-certificate extensions
    return ders


def _connect(endpoint, context: ssl.SSLContext, timeout_s: float, session=None) -> tuple[ssl.SSLSocket, int]:
    t0 = time.perf_counter_ns()
    raw = socket.create_connection((endpoint.address, endpoint.port), timeout=timeout_s)
    try:
        sock = context.wrap_socket(raw, server_hostname=endpoint.host, session=session)
    except BaseException:
        raw.close()
        raise
    return sock, (time.perf_counter_ns() - t0) // 1000


def _finish(sock: ssl.SSLSocket, endpoint) -> ssl.SSLSession | None:
    """A HEAD request read to the end: TLS 1.3 tickets arrive after the handshake."""
    try:
        sock.sendall(f"HEAD / HTTP/1.1\r\nHost: {endpoint.host_header}\r\nConnection: close\r\n\r\n".encode())
        while sock.recv(65536):
            pass
    except (OSError, ssl.SSLError):
        pass
    session = sock.session
    sock.close()
    return session


def probe(endpoint, context: ssl.SSLContext, variant: dict, timeout_s: float) -> dict:
    """One handshake with the variant (and, for resumption, a second one offering its session):
    the negotiated parameters. Raises Refused when it cannot be measured as asked."""
    log = HandshakeLog()
    context._msg_callback = log
    try:
        sock, handshake_us = _connect(endpoint, context, timeout_s)
    except (OSError, ssl.SSLError) as exc:
        # An alert is the server's refusal; anything else failed on the way (and is said as such).
        who = "the server refused the handshake" if "ALERT" in str(exc) else "the handshake failed"
        raise Refused(f"{who}: {type(exc).__name__}: {exc}{_hint(variant)}") from None
    finally:
        context._msg_callback = None
    chain = log.chain() or [sock.getpeercert(binary_form=True) or b""]
    facts = certificate_facts([der for der in chain if der])
    negotiated = {
        "protocol": sock.version(),
        "cipher": sock.cipher()[0],
        "group": log.group(),
        "cert_key_type": facts.get("cert_key_type"),
        "cert_key_bits": facts.get("cert_key_bits"),
        "chain_length": facts.get("chain_length"),
        "chain_bytes": facts.get("chain_bytes"),
        "server_flight_bytes": log.server_flight_bytes(),
        "probe_handshake_us": handshake_us,
        "session_resumed": None,
    }
    negotiated["client_cert_requested"] = check_client_cert(variant, log.messages)
    session = _finish(sock, endpoint)
    _check(variant, negotiated)
    if policy(variant).resume_sessions:
        negotiated["session_resumed"] = _resumes(endpoint, context, session, timeout_s)
        if not negotiated["session_resumed"]:
            raise Refused(
                f"the server did not resume the session ({variant['resumption']}): {_said(negotiated)}"
            )
    return negotiated


def _hint(variant: dict) -> str:
    if (
        variant.get("cert") == "ecdsa"
        and variant.get("protocol") != "tls1.3"
        and variant.get("group") not in (None, "p256")
    ):
        return (
            " (in TLS 1.2 the client's supported groups also name the curves it accepts for an ECDSA "
            "certificate, and Python's ssl offers one group only: a P-256 certificate needs the p256 group)"
        )
    return ""


def _resumes(endpoint, context: ssl.SSLContext, session, timeout_s: float) -> bool:
    if session is None:
        return False
    try:
        sock, _ = _connect(endpoint, context, timeout_s, session)
    except (OSError, ssl.SSLError):
        return False
    reused = sock.session_reused
    _finish(sock, endpoint)
    return bool(reused)


def _said(negotiated: dict) -> str:
    return (
        f"negotiated {negotiated['protocol']}, group {negotiated['group'] or 'unknown'}, "
        f"{negotiated['cert_key_type']} certificate"
    )


def _check(variant: dict, negotiated: dict) -> None:
    """The handshake must be the variant: else it is refused, with what was negotiated instead."""
    wrong = []
    protocol, group, cert = variant.get("protocol"), variant.get("group"), variant.get("cert")
    if protocol and negotiated["protocol"] != NEGOTIATED_PROTOCOL[protocol]:
        wrong.append(f"protocol {protocol}")
    if group and negotiated["group"] != group:
        wrong.append(f"group {group}")
    if cert and negotiated["cert_key_type"] != CERT_KEY_TYPES[cert]:
        why = (
            " (Python's ssl cannot restrict TLS 1.3 signature algorithms: in TLS 1.3 the server "
            "chooses the certificate; only TLS 1.2 can choose it, by cipher suite)"
            if negotiated["protocol"] == "TLSv1.3"
            else ""
        )
        wrong.append(f"a {cert.upper()} certificate{why}")
    if variant.get("resumption") == "session_id" and negotiated["protocol"] == "TLSv1.3":
        wrong.append("session-ID resumption (TLS 1.3 resumes by ticket only)")
    if wrong:
        raise Refused(f"asked for {', '.join(wrong)}; {_said(negotiated)}")


@dataclasses.dataclass
class SubArm:
    spec: ArmSpec
    context: ssl.SSLContext
    policy: ConnectionPolicy


def expand(
    arm: ArmSpec,
    endpoint,
    dimensions: list[str],
    verify: bool,
    timeout_s: float,
    library: str = SYSTEM,
    client_certs: dict | None = None,
) -> tuple[list[SubArm], list[dict]]:
    """Probe every variant of ``dimensions`` against the arm's endpoint: the sub-arms to measure and
    the ``matrix`` message's entries (every variant, measured or refused, in order). The variants are
    built on Python's ``ssl``: on another TLS library (``library``) each is refused saying so, never
    measured on a library the run did not choose."""
    sub_arms: list[SubArm] = []
    entries: list[dict] = []
    for variant in matrix.variants(dimensions, arm.name):
        name = matrix.variant_name(variant, arm.name)
        entry = {"name": name, "variant": variant, "status": "measured", "detail": "", "negotiated": {}}
        try:
            if library != SYSTEM:
                raise Refused(BUNDLED_REFUSAL)
            context = build_context(variant, verify, client_certs)
            entry["negotiated"] = probe(endpoint, context, variant, timeout_s)
        except Refused as exc:
            entry.update(status="refused", detail=str(exc))
        else:
            sub_arms.append(SubArm(ArmSpec(name=name, url=arm.url), context, policy(variant, arm.name)))
        entries.append(entry)
    return sub_arms, entries
