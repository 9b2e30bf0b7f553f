"""TLS matrix variants on the bundled library (pyOpenSSL on the ``cryptography`` wheel's OpenSSL
4.x): one group by ``SSL_CTX_set1_curves_list`` (hybrids included), one certificate type by
``SSL_CTX_set1_sigalgs_list`` under TLS 1.2 and 1.3, and a probe over memory BIOs that counts the
bytes each side sent and reads the group with ``SSL_get0_group_name`` (``workers.engine.matrix.variants``)."""

from __future__ import annotations

import socket
import ssl
import time

from cryptography.hazmat.primitives import serialization

from portal.lib.tls import matrix
from workers.engine.http.endpoint import ARM_POLICIES
from workers.engine.http.http2_state import head_request
from workers.engine.matrix.rules import (
    Refused,
    add_client_cert,
    check,
    check_alpn,
    check_client_cert,
    chosen_by,
    handshake_refused,
    openssl_group,
    resumed_or_refused,
)
from workers.engine.tls import libraries, mtls
from workers.engine.tls.facts import certificate_facts
from workers.engine.tls.libraries import BUNDLED, HTTP1, SSL, _ffi, _lib

# The signature algorithms per certificate type (SSL_CTX_set1_sigalgs_list): a server with several
# certificates can only answer with the one these allow.
SIGALGS = {
    "rsa": "rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:rsa_pss_rsae_sha512:"
    "rsa_pkcs1_sha256:rsa_pkcs1_sha384:rsa_pkcs1_sha512",
    "ecdsa": "ecdsa_secp256r1_sha256:ecdsa_secp384r1_sha384:ecdsa_secp521r1_sha512",
    "ed25519": "ed25519",
}
PROTOCOLS = {"tls1.2": SSL.TLS1_2_VERSION, "tls1.3": SSL.TLS1_3_VERSION}


def bundled_knows_group(name: str) -> bool:
    """Whether the bundled library takes ``name`` as a key-exchange group."""
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    known = _lib.SSL_CTX_set1_curves_list(context._context, name.encode()) == 1
    _lib.ERR_clear_error()
    return known


def build_context(
    variant: dict, verify: bool, client_certs: dict | None = None, alpn: tuple[str, ...] = HTTP1
) -> SSL.Context:
    """The variant's client context on the bundled library: one group, the signature algorithms of
    one certificate type (under TLS 1.2 and 1.3 alike), the ``client_cert`` variant's certificate,
    ``alpn`` offered (h2 alone for an HTTP/2 arm's variants)."""
    context = libraries.bundled_context(verify, alpn=alpn)
    add_client_cert(context, variant, client_certs)
    protocol = variant.get("protocol")
    if protocol:
        version = PROTOCOLS[protocol]
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
                f"the bundled TLS library ({libraries.bundled_openssl()}) does not know the group {name}"
            )
    cert = variant.get("cert")
    if cert and _lib.SSL_CTX_set1_sigalgs_list(context._context, SIGALGS[cert].encode()) != 1:
        _lib.ERR_clear_error()
        raise Refused(f"the bundled TLS library ({libraries.bundled_openssl()}) cannot offer {SIGALGS[cert]}")
    if variant.get("resumption") == "session_id":
        context.set_options(SSL.OP_NO_TICKET)
    return context


class _Pumped:
    """A bundled-library client connection on memory BIOs over a blocking socket: every byte each
    side sends passes here and is counted, flight by flight (``flights``: ``[side, bytes]`` with
    consecutive sends of one side merged)."""

    def __init__(self, endpoint, context: SSL.Context, timeout_s: float, session=None) -> None:
        self.sock = socket.create_connection((endpoint.address, endpoint.port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.tls = libraries.BundledTLS(context, None, endpoint.host, session)
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

    def _send(self, data: bytes) -> None:
        self.conn.send(data)
        self._flush()

    def _recv(self) -> bytes:
        """The next decrypted bytes, b"" at the end."""
        while True:
            try:
                return self.conn.recv(65536)
            except SSL.WantReadError:
                if not self._feed():
                    return b""

    def finish(self, endpoint, http2: bool = False):
        """A HEAD request read to the end (over HTTP/2 on an HTTP/2 arm's variant: TLS 1.3 tickets
        arrive after the handshake); the session."""
        try:
            if http2:
                head_request(self._send, self._recv, endpoint.host_header)
            else:
                self._send(
                    f"HEAD / HTTP/1.1\r\nHost: {endpoint.host_header}\r\nConnection: close\r\n\r\n".encode()
                )
                while self._recv():
                    pass
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


def negotiate(
    endpoint, context: SSL.Context, variant: dict, timeout_s: float, arm: str = matrix.MATRIX_ARM
) -> dict:
    """``variants.negotiate`` on the bundled library: the group from ``SSL_get0_group_name``, the certificate
    from the chain the server sent, the bytes each side sent from the connection's own pump, and the
    handshake messages (``SSL_CTX_set_msg_callback``, set for this handshake only) for the client
    certificate's check."""
    messages = mtls.Messages()
    keep = _ffi.callback("void(int, int, int, const void *, size_t, SSL *, void *)", messages.bundled)
    _lib.SSL_CTX_set_msg_callback(context._context, keep)
    try:
        return _negotiate(endpoint, context, variant, timeout_s, messages, arm)
    finally:
        _lib.SSL_CTX_set_msg_callback(context._context, _ffi.NULL)


def _negotiate(endpoint, context: SSL.Context, variant: dict, timeout_s: float, messages, arm: str) -> dict:
    t0 = time.perf_counter_ns()
    try:
        pumped = _Pumped(endpoint, context, timeout_s)
    except (OSError, ssl.SSLError) as exc:
        raise Refused(f"the handshake failed: {type(exc).__name__}: {exc}") from None
    try:
        pumped.handshake()
    except (OSError, ssl.SSLError, SSL.Error) as exc:
        pumped.close()
        raise handshake_refused(exc, variant, arm) from None
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
        "cert_chosen_by": chosen_by(variant, protocol, BUNDLED),
        "probe_handshake_us": handshake_us,
        "session_resumed": None,
        "alpn": pumped.tls.selected_alpn_protocol(),
    }
    http2 = ARM_POLICIES[arm][1].http2
    try:
        check_alpn(arm, negotiated["alpn"])
    except Refused:
        pumped.close()
        raise
    session = pumped.finish(endpoint, http2)
    negotiated["client_cert_requested"] = check_client_cert(variant, list(messages.seen), arm)
    check(variant, negotiated, BUNDLED)
    resumes = (endpoint, context, session, timeout_s, http2)
    resumed_or_refused(variant, negotiated, lambda: _resumes_bundled(*resumes))
    return negotiated


def _resumes_bundled(endpoint, context: SSL.Context, session, timeout_s: float, http2: bool) -> bool:
    if session is None:
        return False
    try:
        pumped = _Pumped(endpoint, context, timeout_s, session)
        pumped.handshake()
    except (OSError, ssl.SSLError, SSL.Error):
        return False
    reused = pumped.tls.session_reused
    pumped.finish(endpoint, http2)
    return bool(reused)
