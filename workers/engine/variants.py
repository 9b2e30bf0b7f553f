"""The TLS configuration matrix on the generator side: one SSL context per variant, and one probing
handshake per variant that says whether the server (and this generator) accept it and what was
really negotiated — from the handshake itself, never assumed.

Variants are built on the run's TLS library (``EngineConfig.tls_library``), never on another.

On the bundled library (pyOpenSSL on the ``cryptography`` wheel's OpenSSL 4.x, ``tlslib``) a client
chooses everything the matrix varies:

* protocol: ``set_min_proto_version`` = ``set_max_proto_version``;
* key-exchange group: ``SSL_CTX_set1_curves_list`` with exactly one group, hybrids included
  (``X25519MLKEM768``) and any group the library knows (``tls_groups``); a name it does not know is
  refused by the generator, a group the server lacks by the server's alert;
* certificate type: ``SSL_CTX_set1_sigalgs_list`` (``SIGALGS``: RSA-PSS/PKCS#1, ECDSA or Ed25519
  only) under TLS 1.2 and 1.3 alike: a server holding several certificates must send the one those
  signature algorithms allow, or refuse;
* resumption as below (``OP_NO_TICKET`` for session IDs).

Its probe runs the handshake over memory BIOs on a plain socket, so it counts the bytes each side
sent (``client_handshake_bytes``, ``server_handshake_bytes``) and each side's first flight exactly,
and reads the negotiated group with ``SSL_get0_group_name`` (OpenSSL's own name, e.g.
``X25519MLKEM768``, ``x25519``, ``secp256r1``) and the certificate from the chain the server sent.

What Python's ``ssl`` (3.11, OpenSSL 3.0.x here; the system library) lets a client choose — what it
cannot is refused saying so and that it ``needs the bundled TLS library``:

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

from cryptography.hazmat.primitives import serialization

from portal.lib import matrix
from portal.lib.protocol import ArmSpec
from workers.engine import tlslib
from workers.engine.client import ARM_POLICIES, ConnectionPolicy, make_ssl_context
from workers.engine.tlsinfo import certificate_facts
from workers.engine.tlslib import BUNDLED, SSL, SYSTEM, _ffi, _lib

OPENSSL_GROUPS = {"x25519": "X25519", "p256": "prime256v1", "x25519mlkem768": "X25519MLKEM768"}
# TLS group code points → the names OpenSSL prints (``SSL_get0_group_name``), for the system
# library's probe, which reads the code from the handshake messages.
GROUP_IDS = {
    0x0017: "secp256r1",
    0x0018: "secp384r1",
    0x0019: "secp521r1",
    0x001D: "x25519",
    0x001E: "x448",
    0x11EB: "SecP256r1MLKEM768",
    0x11EC: "X25519MLKEM768",
    0x11ED: "SecP384r1MLKEM1024",
}
# The bundled library's signature algorithms per certificate type (SSL_CTX_set1_sigalgs_list): a
# server with several certificates can only answer with the one these allow.
SIGALGS = {
    "rsa": "rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:rsa_pss_rsae_sha512:"
    "rsa_pkcs1_sha256:rsa_pkcs1_sha384:rsa_pkcs1_sha512",
    "ecdsa": "ecdsa_secp256r1_sha256:ecdsa_secp384r1_sha384:ecdsa_secp521r1_sha512",
    "ed25519": "ed25519",
}
WAY_OUT = "needs the bundled TLS library (tls_library bundled, CLI --tls-library bundled)"
PROTOCOLS = {"tls1.2": ssl.TLSVersion.TLSv1_2, "tls1.3": ssl.TLSVersion.TLSv1_3}
BUNDLED_PROTOCOLS = {"tls1.2": SSL.TLS1_2_VERSION, "tls1.3": SSL.TLS1_3_VERSION}
NEGOTIATED_PROTOCOL = {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}
CERT_KEY_TYPES = {"rsa": "RSA", "ecdsa": "EC", "ed25519": "Ed25519"}
TLS12_SUITES = {
    "ecdsa": "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305",
    "rsa": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305",
}
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


def openssl_group(group: str) -> str:
    """The name a library is given for a group value: OpenSSL's for the built-in ones, the user's
    own name for a group of ``tls_groups``."""
    return OPENSSL_GROUPS.get(group, group)


def bundled_knows_group(name: str) -> bool:
    """Whether the bundled library takes ``name`` as a key-exchange group."""
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    known = _lib.SSL_CTX_set1_curves_list(context._context, name.encode()) == 1
    _lib.ERR_clear_error()
    return known


def build_context(variant: dict, verify: bool, library: str = SYSTEM) -> ssl.SSLContext | SSL.Context:
    """The variant's client context (shared by every connection of its sub-arm), on ``library``."""
    if library == BUNDLED:
        return build_bundled_context(variant, verify)
    context = make_ssl_context(verify)
    protocol = variant.get("protocol")
    if protocol:
        context.minimum_version = context.maximum_version = PROTOCOLS[protocol]
    group = variant.get("group")
    if group:
        # Python 3.15's set_groups takes any TLS group; set_ecdh_curve only names with an OpenSSL
        # object id, which the ML-KEM hybrids lack even where OpenSSL (3.5+) has them.
        setter = getattr(context, "set_groups", None) or context.set_ecdh_curve
        try:
            setter(openssl_group(group))
        except (ValueError, ssl.SSLError) as exc:
            reason = group_refusal(openssl_group(group), ssl.OPENSSL_VERSION_INFO, setter.__name__)
            way_out = f"; {WAY_OUT}" if bundled_knows_group(openssl_group(group)) else ""
            raise Refused(f"{reason} ({ssl.OPENSSL_VERSION}: {exc}){way_out}") from None
    cert = variant.get("cert")
    if cert == "ed25519":
        # TLS 1.2 signs with Ed25519 under the ECDSA suites, TLS 1.3 by signature algorithm: Python's
        # ssl can choose neither.
        raise Refused(
            "the system TLS library (Python's ssl) cannot ask for an Ed25519 certificate (it has no "
            f"signature-algorithm setter, and TLS 1.2 signs Ed25519 under the ECDSA suites); {WAY_OUT}"
        )
    if cert and protocol == "tls1.3":
        raise Refused(
            "the system TLS library (Python's ssl) cannot choose the certificate under TLS 1.3: it has "
            f"no signature-algorithm setter, so the server chooses; {WAY_OUT}"
        )
    if cert:
        context.set_ciphers(TLS12_SUITES[cert])  # TLS 1.2 only; TLS 1.3 suites are untouched
    if variant.get("resumption") == "session_id":
        context.options |= ssl.OP_NO_TICKET
    return context


def build_bundled_context(variant: dict, verify: bool) -> SSL.Context:
    """The variant's client context on the bundled library: one group, the signature algorithms of
    one certificate type (under TLS 1.2 and 1.3 alike)."""
    context = tlslib.bundled_context(verify)
    protocol = variant.get("protocol")
    if protocol:
        version = BUNDLED_PROTOCOLS[protocol]
        context.set_min_proto_version(version)
        context.set_max_proto_version(version)
    group = variant.get("group")
    if group:
        name = openssl_group(group)
        if protocol == "tls1.2" and "mlkem" in name.lower():
            raise Refused(f"{name} is a TLS 1.3 key exchange (ML-KEM hybrids): TLS 1.2 cannot use it")
        if _lib.SSL_CTX_set1_curves_list(context._context, name.encode()) != 1:
            _lib.ERR_clear_error()
            raise Refused(
                f"the bundled TLS library ({tlslib.bundled_openssl()}) does not know the group {name}"
            )
    cert = variant.get("cert")
    if cert and _lib.SSL_CTX_set1_sigalgs_list(context._context, SIGALGS[cert].encode()) != 1:
        _lib.ERR_clear_error()
        raise Refused(f"the bundled TLS library ({tlslib.bundled_openssl()}) cannot offer {SIGALGS[cert]}")
    if variant.get("resumption") == "session_id":
        context.set_options(SSL.OP_NO_TICKET)
    return context


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

    def sent_bytes(self) -> dict:
        """Bytes of the records each side sent during the handshake (the log holds the handshake
        only), and the client's first flight (its ClientHello: what the key share makes larger)."""
        client = server = first = 0
        for direction, content_type, _, data in self.messages:
            if content_type != 256:
                continue
            size = 5 + int.from_bytes(data[3:5], "big")
            if direction == "write":
                client += size
                first += size if not server else 0
            else:
                server += size
        return {
            "client_handshake_bytes": client or None,
            "server_handshake_bytes": server or None,
            "client_flight_bytes": first or None,
        }

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


def probe(endpoint, context: ssl.SSLContext | SSL.Context, variant: dict, timeout_s: float) -> dict:
    """One handshake with the variant (and, for resumption, a second one offering its session):
    the negotiated parameters. Raises Refused when it cannot be measured as asked."""
    if isinstance(context, SSL.Context):
        return probe_bundled(endpoint, context, variant, timeout_s)
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
        **log.sent_bytes(),
        "cert_chosen_by": _chosen_by(variant, sock.version(), SYSTEM),
        "probe_handshake_us": handshake_us,
        "session_resumed": None,
    }
    session = _finish(sock, endpoint)
    _check(variant, negotiated)
    if policy(variant).resume_sessions:
        negotiated["session_resumed"] = _resumes(endpoint, context, session, timeout_s)
        if not negotiated["session_resumed"]:
            raise Refused(
                f"the server did not resume the session ({variant['resumption']}): {_said(negotiated)}"
            )
    return negotiated


def _chosen_by(variant: dict, protocol: str | None, library: str) -> str | None:
    """How the certificate type was chosen: by the client's signature algorithms (bundled), by its
    TLS 1.2 cipher suites (system), or by the server alone (system, TLS 1.3)."""
    if not variant.get("cert"):
        return None
    if library == BUNDLED:
        return "signature algorithms"
    return "cipher suites" if protocol == "TLSv1.2" else "the server"


class _Pumped:
    """A bundled-library client connection on memory BIOs over a blocking socket: every byte each
    side sends passes here and is counted, flight by flight (``flights``: ``[side, bytes]`` with
    consecutive sends of one side merged)."""

    def __init__(self, endpoint, context: SSL.Context, timeout_s: float, session=None) -> None:
        self.sock = socket.create_connection((endpoint.address, endpoint.port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.tls = tlslib.BundledTLS(context, None, endpoint.host, session)
        except BaseException:
            self.sock.close()
            raise
        self.conn = self.tls.conn
        self.flights: list[list] = []

    def _note(self, side: str, size: int) -> None:
        if self.flights and self.flights[-1][0] == side:
            self.flights[-1][1] += size
        else:
            self.flights.append([side, size])

    def _flush(self) -> None:
        while True:
            try:
                out = self.conn.bio_read(65536)
            except SSL.WantReadError:
                return
            if not out:
                return
            self.sock.sendall(out)
            self._note("client", len(out))

    def _feed(self) -> bool:
        data = self.sock.recv(65536)
        if not data:
            return False
        self.conn.bio_write(data)
        self._note("server", len(data))
        return True

    def handshake(self) -> None:
        while True:
            try:
                self.conn.do_handshake()
            except SSL.WantReadError:
                self._flush()
                if not self._feed():
                    raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "the server closed the connection") from None
                continue
            except SSL.Error:
                self._flush()  # the client's alert, if any, still goes out
                raise
            self._flush()
            return

    def sent_bytes(self) -> dict:
        client = sum(size for side, size in self.flights if side == "client")
        server = sum(size for side, size in self.flights if side == "server")
        first_server = next((size for side, size in self.flights if side == "server"), None)
        return {
            "client_handshake_bytes": client or None,
            "server_handshake_bytes": server or None,
            "client_flight_bytes": self.flights[0][1] if self.flights else None,
            "server_flight_bytes": first_server,
        }

    def finish(self, endpoint):
        """A HEAD request read to the end (TLS 1.3 tickets arrive after the handshake); the session."""
        try:
            self.conn.send(
                f"HEAD / HTTP/1.1\r\nHost: {endpoint.host_header}\r\nConnection: close\r\n\r\n".encode()
            )
            self._flush()
            while True:
                try:
                    self.conn.recv(65536)
                except SSL.WantReadError:
                    if not self._feed():
                        break
        except (SSL.Error, OSError):
            pass
        session = self.conn.get_session()
        self.close()
        return session

    def close(self) -> None:
        self.tls.close()
        self.sock.close()


def _peer_chain(conn: SSL.Connection) -> list[bytes]:
    chain = conn.get_peer_cert_chain(as_cryptography=True) or []
    return [cert.public_bytes(serialization.Encoding.DER) for cert in chain]


def probe_bundled(endpoint, context: SSL.Context, variant: dict, timeout_s: float) -> dict:
    """``probe`` on the bundled library: the group from ``SSL_get0_group_name``, the certificate
    from the chain the server sent, the bytes each side sent from the connection's own pump."""
    t0 = time.perf_counter_ns()
    try:
        pumped = _Pumped(endpoint, context, timeout_s)
    except (OSError, ssl.SSLError) as exc:
        raise Refused(f"the handshake failed: {type(exc).__name__}: {exc}") from None
    try:
        pumped.handshake()
    except (OSError, ssl.SSLError, SSL.Error) as exc:
        pumped.close()
        text = str(exc)
        who = "the server refused the handshake" if "alert" in text.lower() else "the handshake failed"
        raise Refused(f"{who}: {type(exc).__name__}: {text}{_hint(variant)}") from None
    handshake_us = (time.perf_counter_ns() - t0) // 1000
    conn = pumped.conn
    name = _lib.SSL_get0_group_name(conn._ssl)
    facts = certificate_facts(_peer_chain(conn))
    protocol = conn.get_protocol_version_name()
    negotiated = {
        "protocol": protocol,
        "cipher": conn.get_cipher_name(),
        "group": _ffi.string(name).decode() if name != _ffi.NULL else None,
        "cert_key_type": facts.get("cert_key_type"),
        "cert_key_bits": facts.get("cert_key_bits"),
        "chain_length": facts.get("chain_length"),
        "chain_bytes": facts.get("chain_bytes"),
        **pumped.sent_bytes(),
        "cert_chosen_by": _chosen_by(variant, protocol, BUNDLED),
        "probe_handshake_us": handshake_us,
        "session_resumed": None,
    }
    session = pumped.finish(endpoint)
    _check(variant, negotiated, BUNDLED)
    if policy(variant).resume_sessions:
        negotiated["session_resumed"] = _resumes_bundled(endpoint, context, session, timeout_s)
        if not negotiated["session_resumed"]:
            raise Refused(
                f"the server did not resume the session ({variant['resumption']}): {_said(negotiated)}"
            )
    return negotiated


def _resumes_bundled(endpoint, context: SSL.Context, session, timeout_s: float) -> bool:
    if session is None:
        return False
    try:
        pumped = _Pumped(endpoint, context, timeout_s, session)
        pumped.handshake()
    except (OSError, ssl.SSLError, SSL.Error):
        return False
    reused = pumped.tls.session_reused
    pumped.finish(endpoint)
    return bool(reused)


def _hint(variant: dict) -> str:
    if (
        variant.get("cert") == "ecdsa"
        and variant.get("protocol") != "tls1.3"
        and variant.get("group") not in (None, "p256")
    ):
        return (
            " (in TLS 1.2 the client's supported groups also name the curves it accepts for an ECDSA "
            "certificate, and the variant offers one group only: a P-256 certificate needs the p256 group)"
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


def _check(variant: dict, negotiated: dict, library: str = SYSTEM) -> None:
    """The handshake must be the variant: else it is refused, with what was negotiated instead."""
    wrong = []
    protocol, group, cert = variant.get("protocol"), variant.get("group"), variant.get("cert")
    if protocol and negotiated["protocol"] != NEGOTIATED_PROTOCOL[protocol]:
        wrong.append(f"protocol {protocol}")
    if group and not matrix.same_group(group, negotiated["group"]):
        wrong.append(f"group {openssl_group(group)}")
    if cert and negotiated["cert_key_type"] != CERT_KEY_TYPES[cert]:
        if library == SYSTEM and negotiated["protocol"] == "TLSv1.3":
            # Not the server's refusal: this library cannot ask for a certificate type in TLS 1.3.
            raise Refused(
                f"the system TLS library (Python's ssl) cannot choose the certificate under TLS 1.3 "
                f"(no signature-algorithm setter): the server chose {negotiated['cert_key_type']}; {WAY_OUT}"
            )
        wrong.append(f"a {CERT_KEY_TYPES[cert]} certificate")
    if variant.get("resumption") == "session_id" and negotiated["protocol"] == "TLSv1.3":
        wrong.append("session-ID resumption (TLS 1.3 resumes by ticket only)")
    if wrong:
        raise Refused(f"asked for {', '.join(wrong)}; {_said(negotiated)}")


@dataclasses.dataclass
class SubArm:
    spec: ArmSpec
    context: ssl.SSLContext | SSL.Context
    policy: ConnectionPolicy


def expand(
    arm: ArmSpec,
    endpoint,
    dimensions: list[str],
    verify: bool,
    timeout_s: float,
    library: str = SYSTEM,
    groups: list[str] | None = None,
) -> tuple[list[SubArm], list[dict]]:
    """Probe every variant of ``dimensions`` against the arm's endpoint: the sub-arms to measure and
    the ``matrix`` message's entries (every variant, measured or refused, in order). Every variant
    is built on the run's TLS library (``library``): what it cannot make is refused saying so.
    ``groups``: the groups the user named besides the built-in ones (``tls_groups``)."""
    sub_arms: list[SubArm] = []
    entries: list[dict] = []
    for variant in matrix.variants(dimensions, arm.name, groups):
        name = matrix.variant_name(variant, arm.name)
        entry = {"name": name, "variant": variant, "status": "measured", "detail": "", "negotiated": {}}
        try:
            context = build_context(variant, verify, library)
            entry["negotiated"] = probe(endpoint, context, variant, timeout_s)
        except Refused as exc:
            entry.update(status="refused", detail=str(exc))
        else:
            sub_arms.append(SubArm(ArmSpec(name=name, url=arm.url), context, policy(variant, arm.name)))
        entries.append(entry)
    return sub_arms, entries
