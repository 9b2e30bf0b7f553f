"""The TLS configuration matrix on the generator side: one SSL context per variant, and one probing
handshake per variant that says whether the server (and this generator) accept it and what was
really negotiated — from the handshake itself, never assumed.

Variants are built on the run's TLS library (``EngineConfig.tls_library``), never on another: the
system library here, the bundled one in ``bundled``; what a variant must be on either, and the check
of its handshake (``negotiate``), in ``rules``; the system library's message parsing in ``handshake_log``.

On the bundled library (pyOpenSSL on the ``cryptography`` wheel's OpenSSL 4.x, ``tls.libraries``) a client
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

On either library a variant of an HTTP/2 arm (``h2_new``, ``h2``: ``matrix.HTTP2_ARMS``) offers h2
alone over ALPN, as the arm's own context does; its probe records the protocol ALPN selected
(``negotiated.alpn``, on every variant) and refuses the variant when it is not h2
(``rules.check_alpn``), then sends its request over HTTP/2 (``http2_state.head_request``).
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
import time

from portal.lib.runs.protocol import ArmSpec
from portal.lib.tls import matrix
from workers.engine.http.endpoint import ARM_POLICIES, ConnectionPolicy
from workers.engine.http.http2_state import head_request
from workers.engine.matrix import bundled
from workers.engine.matrix.bundled import SIGALGS, bundled_knows_group  # noqa: F401
from workers.engine.matrix.handshake_log import HandshakeLog
from workers.engine.matrix.rules import (  # noqa: F401 (the matrix's names, read here by the engine and tests)
    CERT_KEY_TYPES,
    OPENSSL_GROUPS,
    WAY_OUT,
    Refused,
    add_client_cert,
    check,
    check_alpn,
    check_client_cert,
    chosen_by,
    handshake_refused,
    hint,
    openssl_group,
    policy,
    resumed_or_refused,
    said,
)
from workers.engine.tls.facts import certificate_facts
from workers.engine.tls.libraries import BUNDLED, H2, HTTP1, SSL, SYSTEM, make_ssl_context

PROTOCOLS = {"tls1.2": ssl.TLSVersion.TLSv1_2, "tls1.3": ssl.TLSVersion.TLSv1_3}
TLS12_SUITES = {
    "ecdsa": "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305",
    "rsa": "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-CHACHA20-POLY1305",
}


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


def build_context(
    variant: dict,
    verify: bool,
    library: str = SYSTEM,
    client_certs: dict | None = None,
    alpn: tuple[str, ...] = HTTP1,
) -> ssl.SSLContext | SSL.Context:
    """The variant's client context (shared by every connection of its sub-arm), on ``library``;
    ``client_certs``: the run's (``EngineConfig.client_certs``), for the ``client_cert`` dimension;
    ``alpn``: what it offers (h2 alone for an HTTP/2 arm's variants, ``libraries.H2``)."""
    if library == BUNDLED:
        return bundled.build_context(variant, verify, client_certs, alpn)
    context = make_ssl_context(verify, alpn=alpn)
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


def _connect(endpoint, context: ssl.SSLContext, timeout_s: float, session=None) -> tuple[ssl.SSLSocket, int]:
    t0 = time.perf_counter_ns()
    raw = socket.create_connection((endpoint.address, endpoint.port), timeout=timeout_s)
    try:
        sock = context.wrap_socket(raw, server_hostname=endpoint.host, session=session)
    except BaseException:
        raw.close()
        raise
    return sock, (time.perf_counter_ns() - t0) // 1000


def _finish(sock: ssl.SSLSocket, endpoint, http2: bool = False) -> ssl.SSLSession | None:
    """A HEAD request read to the end (over HTTP/2 on an HTTP/2 arm's variant): TLS 1.3 tickets arrive
    after the handshake."""
    try:
        if http2:
            head_request(sock.sendall, lambda: sock.recv(65536), endpoint.host_header)
        else:
            sock.sendall(
                f"HEAD / HTTP/1.1\r\nHost: {endpoint.host_header}\r\nConnection: close\r\n\r\n".encode()
            )
            while sock.recv(65536):
                pass
    except (OSError, ssl.SSLError):
        pass
    session = sock.session
    sock.close()
    return session


def negotiate(
    endpoint,
    context: ssl.SSLContext | SSL.Context,
    variant: dict,
    timeout_s: float,
    arm: str = matrix.MATRIX_ARM,
) -> dict:
    """One handshake with the variant of ``arm`` (and, for resumption, a second one offering its
    session): the negotiated parameters. Raises Refused when it cannot be measured as asked."""
    if isinstance(context, SSL.Context):
        return bundled.negotiate(endpoint, context, variant, timeout_s, arm)
    log = HandshakeLog()
    context._msg_callback = log
    try:
        sock, handshake_us = _connect(endpoint, context, timeout_s)
    except (OSError, ssl.SSLError) as exc:
        # An alert is the server's refusal; anything else failed on the way (and is said as such).
        raise handshake_refused(exc, variant, arm) from None
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
        "cert_chosen_by": chosen_by(variant, sock.version(), SYSTEM),
        "probe_handshake_us": handshake_us,
        "session_resumed": None,
        "alpn": sock.selected_alpn_protocol(),
    }
    http2 = ARM_POLICIES[arm][1].http2
    try:
        negotiated["client_cert_requested"] = check_client_cert(variant, log.messages, arm)
        check_alpn(arm, negotiated["alpn"])
    except Refused:
        sock.close()
        raise
    session = _finish(sock, endpoint, http2)
    check(variant, negotiated)
    resumed_or_refused(variant, negotiated, lambda: _resumes(endpoint, context, session, timeout_s, http2))
    return negotiated


def _resumes(endpoint, context: ssl.SSLContext, session, timeout_s: float, http2: bool) -> bool:
    if session is None:
        return False
    try:
        sock, _ = _connect(endpoint, context, timeout_s, session)
    except (OSError, ssl.SSLError):
        return False
    reused = sock.session_reused
    _finish(sock, endpoint, http2)
    return bool(reused)


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
    client_certs: dict | None = None,
    groups: list[str] | None = None,
) -> tuple[list[SubArm], list[dict]]:
    """Probe every variant of ``dimensions`` against the arm's endpoint: the sub-arms to measure and
    the ``matrix`` message's entries (every variant, measured or refused, in order). Every variant
    is built on the run's TLS library (``library``): what it cannot make is refused saying so.
    ``client_certs``: the run's client certificates (the ``client_cert`` dimension); ``groups``: the
    groups the user named besides the built-in ones (``tls_groups``)."""
    sub_arms: list[SubArm] = []
    entries: list[dict] = []
    alpn = H2 if ARM_POLICIES[arm.name][1].http2 else HTTP1
    for variant in matrix.variants(dimensions, arm.name, groups):
        name = matrix.variant_name(variant, arm.name)
        entry = {"name": name, "variant": variant, "status": "measured", "detail": "", "negotiated": {}}
        try:
            context = build_context(variant, verify, library, client_certs, alpn)
            entry["negotiated"] = negotiate(endpoint, context, variant, timeout_s, arm.name)
        except Refused as exc:
            entry.update(status="refused", detail=str(exc))
        else:
            sub_arms.append(SubArm(ArmSpec(name=name, url=arm.url), context, policy(variant, arm.name)))
        entries.append(entry)
    return sub_arms, entries
