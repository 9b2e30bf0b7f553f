"""What a TLS server accepts, probed on the bundled TLS library (pyOpenSSL on the ``cryptography``
wheel's OpenSSL 4.x, ``workers/engine/tls/libraries.py``): the only library here that can offer one given
key-exchange group (hybrids such as X25519MLKEM768 included) or one given signature algorithm, and
read back the group negotiated.

* **groups**: one short handshake per candidate group, the client offering that group alone; the
  server accepts it or refuses with an alert (it cannot ask for another group: there is none).
  ``negotiated`` is the group as OpenSSL names it after the handshake (``SSL_get0_group_name``).
* **signature algorithms**: one handshake per candidate, offering that algorithm alone: the server
  accepts it when it holds a certificate it can sign with it (a server with an RSA and an ECDSA
  certificate answers either); ``cert_key_type`` is the key of the certificate that came back.
* **client certificate**: whether the server sent a CertificateRequest (seen in the handshake's
  states), the CA names it listed (``certificate_authorities``), and whether it went on without a
  certificate (a ``HEAD /`` answered) or ended the connection with an alert (required).

Each candidate is ``{"name", "accepted", "reason"}``: ``accepted`` ``True``/``False`` is the server's
answer, ``None`` that the probe could not ask (the library cannot offer it under the protocol, the
time ran out); ``reason`` is the server's alert or why it was not asked. Run at most once per run,
after a handshake worked, on the protocol version that handshake negotiated, within ``budget_s``.
Certificates are not verified here: the question is what the server accepts, not whom to trust.
Never raises for network errors.
"""

from __future__ import annotations

import socket
import ssl
import time

from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from OpenSSL import SSL
from OpenSSL._util import ffi as _ffi
from OpenSSL._util import lib as _lib

from workers.engine.tls import libraries

# pyOpenSSL's cffi binding, Context._context and Connection._ssl are private: checked on the version in
# libraries.PRIVATE_API_CHECKED_ON (tests/workers/test_private_api.py fails on another until checked again).

# Names as SSL_CTX_set1_curves_list takes them; the hybrids first (TLS 1.3 only).
GROUPS = (
    "X25519MLKEM768",
    "SecP256r1MLKEM768",
    "SecP384r1MLKEM1024",
    "X25519",
    "P-256",
    "P-384",
    "P-521",
    "X448",
    "ffdhe2048",
)
HYBRID_GROUPS = frozenset(("X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"))
# The name OpenSSL gives the group after the handshake (SSL_get0_group_name), where it differs.
NEGOTIATED_NAMES = {
    "X25519": "x25519",
    "X448": "x448",
    "P-256": "secp256r1",
    "P-384": "secp384r1",
    "P-521": "secp521r1",
}
# Named in TLS 1.3 only: TLS 1.2 has no hybrid key exchange, and its DHE uses the server's own group.
TLS13_ONLY_GROUPS = HYBRID_GROUPS | {"ffdhe2048"}
# TLS 1.3 signature schemes (RFC 8446 names, as SSL_CTX_set1_sigalgs_list takes them) …
SIGALGS = (
    "ecdsa_secp256r1_sha256",
    "ecdsa_secp384r1_sha384",
    "ecdsa_secp521r1_sha512",
    "ed25519",
    "ed448",
    "rsa_pss_rsae_sha256",
    "rsa_pss_rsae_sha384",
    "rsa_pss_rsae_sha512",
    "rsa_pss_pss_sha256",
    "mldsa65",
)
# … and what TLS 1.2 adds (PKCS#1 v1.5 signs no TLS 1.3 handshake).
SIGALGS_TLS12 = ("rsa_pkcs1_sha256", "rsa_pkcs1_sha384")
PROTOCOLS = {"TLSv1.3": SSL.TLS1_3_VERSION, "TLSv1.2": SSL.TLS1_2_VERSION}
CERTIFICATE_REQUEST = b"read server certificate request"  # in SSL_state_string_long


def key_type(key) -> tuple[str, int | None]:
    """A certificate's public key as the facts name it: ("RSA", 2048), ("EC", 256), ("Ed25519", 256)…"""
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC", key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519", 256
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448", 456
    if isinstance(key, dsa.DSAPublicKey):
        return "DSA", key.key_size
    return type(key).__name__, None


class _Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _reason(exc: BaseException) -> str:
    """The short text of a failed handshake: OpenSSL's reason (e.g. "tls alert handshake failure")."""
    text = str(exc)
    if "[pyOpenSSL]" in text and "'" in text:
        parts = [p for p in text.split("'") if p.strip(" ,()[]")]
        if parts:
            return parts[-1]
    return text or type(exc).__name__


def _server_refused(reason: str) -> bool:
    """An alert from the server (its answer) rather than a failure of the client's own."""
    return "alert" in reason


class _Handshake:
    """One connection on the bundled library with the given context; what its handshake showed."""

    def __init__(self) -> None:
        self.requested = False
        # The group and certificate when the request came (in TLS 1.2 the handshake may end there).
        self.at_request: dict = {}
        self.ca_names: list[str] | None = None

    def context(self, protocol: int) -> SSL.Context:
        context = libraries.bundled_context(verify=False)
        context.set_min_proto_version(protocol)
        context.set_max_proto_version(protocol)

        def info(conn: SSL.Connection, where: int, ret: int) -> None:
            if CERTIFICATE_REQUEST in conn.get_state_string() and not self.requested:
                self.requested = True
                self.at_request = _negotiated(conn)
                self.ca_names = [_name_text(n) for n in conn.get_client_ca_list()]

        context.set_info_callback(info)
        return context


def _negotiated(conn: SSL.Connection) -> dict:
    """The group negotiated and the key of the certificate the server sent, so far."""
    group = _lib.SSL_get0_group_name(conn._ssl)
    cert = conn.get_peer_certificate(as_cryptography=True)
    return {
        "negotiated": _ffi.string(group).decode() if group != _ffi.NULL else None,
        "cert_key_type": key_type(cert.public_key())[0] if cert is not None else None,
    }


def _connect(
    host: str, port: int, name: str, context: SSL.Context, timeout_s: float
) -> libraries.BlockingTLS:
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        return libraries.BlockingTLS(context, sock, name)
    except BaseException:
        sock.close()
        raise


def _try(host, port, name, protocol, timeout_s, budget, configure) -> dict:
    """One candidate's handshake: ``configure(ctx)`` restricts the offer (False: the library cannot
    offer it). ``{"accepted", "reason", "negotiated", "cert_key_type"}``."""
    probe = _Handshake()
    context = probe.context(protocol)
    if not configure(context):
        return {"accepted": None, "reason": "the probe's library cannot offer it"}
    left = budget.left()
    if left <= 0:
        return {"accepted": None, "reason": "not tried: the probe's time ran out"}
    try:
        tls = _connect(host, port, name, context, min(timeout_s, left))
    except (OSError, ssl.SSLError, SSL.Error) as exc:
        reason = _reason(exc)
        if probe.requested:
            # TLS 1.2: the server got past the key exchange and its signature, then wanted a
            # certificate this probe does not have.
            required = f"then the server required a client certificate: {reason}"
            return {"accepted": True, "reason": required, **probe.at_request}
        if isinstance(exc, TimeoutError | socket.timeout):
            return {"accepted": None, "reason": "timed out"}
        return {"accepted": False if _server_refused(reason) else None, "reason": reason}
    try:
        return {"accepted": True, "reason": None, **_negotiated(tls.tls.conn)}
    finally:
        tls.close()


def _client_certificate(host, port, name, protocol, timeout_s, budget) -> dict:
    """Whether the server requests a client certificate, the CA names it lists, and whether it
    goes on without one (a ``HEAD /`` answered) or ends the connection (required)."""
    probe = _Handshake()
    context = probe.context(protocol)
    facts: dict = {"client_cert_requested": None, "client_ca_names": None, "client_cert_required": None}
    if budget.left() <= 0:
        return facts
    try:
        tls = _connect(host, port, name, context, min(timeout_s, budget.left()))
    except (OSError, ssl.SSLError, SSL.Error) as exc:
        if probe.requested:  # TLS 1.2: the handshake itself ends without a certificate
            facts.update(
                client_cert_requested=True, client_cert_required=True, client_ca_names=probe.ca_names
            )
            facts["client_cert_alert"] = _reason(exc)
        return facts
    try:
        facts["client_cert_requested"] = probe.requested
        if probe.requested:
            facts["client_ca_names"] = probe.ca_names
            try:
                # TLS 1.3: the server's verdict comes after the client's side of the handshake. Wait
                # for it a moment before writing: a request written into a connection the server has
                # closed makes its kernel reset the connection, and the alert is lost.
                tls.timeout_s = min(0.5, tls.timeout_s or 0.5)
                try:
                    early = tls.recv(1024)
                except TimeoutError:
                    early = None  # nothing yet: the server goes on
                tls.timeout_s = timeout_s
                if early is None:
                    tls.sendall(f"HEAD / HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
                    early = tls.recv(1024)
                facts["client_cert_required"] = not early
            except (OSError, ssl.SSLError) as exc:
                facts["client_cert_required"] = True
                facts["client_cert_alert"] = _reason(exc)
        else:
            facts["client_cert_required"] = False
    finally:
        tls.close()
    return facts


def _name_text(name) -> str:
    """An X509Name as OpenSSL prints it on one line, in its own order: "CN=Example CA, O=Example"."""
    return ", ".join(f"{k.decode()}={v.decode('utf-8', 'replace')}" for k, v in name.get_components())


def _set_groups(group: str):
    return lambda context: _lib.SSL_CTX_set1_curves_list(context._context, group.encode()) == 1


def _set_sigalgs(sigalg: str):
    return lambda context: _lib.SSL_CTX_set1_sigalgs_list(context._context, sigalg.encode()) == 1


def server_accepts(
    host: str,
    port: int,
    *,
    server_name: str | None,
    protocol: str | None,
    timeout_s: float = 5.0,
    budget_s: float = 20.0,
    groups: tuple[str, ...] = GROUPS,
) -> dict:
    """The facts of what host:port accepts (``protocol``: the version a first handshake negotiated,
    "TLSv1.3" or "TLSv1.2"): ``groups``, ``signature_algorithms``, ``client_cert_requested``,
    ``client_ca_names``, ``client_cert_required`` and ``accept_probe`` (the library, protocol,
    handshakes made and any error)."""
    name = server_name or host
    meta = {
        "tls_library": libraries.describe(libraries.BUNDLED),
        "protocol": protocol,
        "handshakes": 0,
        "error": None,
    }
    facts: dict = {"accept_probe": meta, "groups": None, "signature_algorithms": None}
    if protocol not in PROTOCOLS:
        meta["error"] = f"not probed: the server's protocol {protocol!r} is neither TLS 1.3 nor TLS 1.2"
        return facts
    version, budget = PROTOCOLS[protocol], _Budget(budget_s)
    try:
        facts.update(_client_certificate(host, port, name, version, timeout_s, budget))
        meta["handshakes"] += 1
        facts["groups"] = []
        for group in groups:
            if protocol != "TLSv1.3" and group in TLS13_ONLY_GROUPS:
                row = {
                    "accepted": None,
                    "reason": f"not offered: named in TLS 1.3 only (the server spoke {protocol})",
                }
            else:
                row = _try(host, port, name, version, timeout_s, budget, _set_groups(group))
                meta["handshakes"] += row["accepted"] is not None or row["reason"] == "timed out"
                row.pop("cert_key_type", None)
                expected = NEGOTIATED_NAMES.get(group, group)
                if row["accepted"] and row.get("negotiated") is None:
                    # TLS 1.2: offered that group alone, the server chose a key exchange without one.
                    row.update(accepted=False, reason="the server chose a key exchange without a named group")
                elif row["accepted"] and row["negotiated"] != expected:
                    # Never the server's acceptance of this group: the handshake did without it.
                    row.update(accepted=None, reason=f"the handshake used {row['negotiated']} instead")
            facts["groups"].append({"name": group, "hybrid": group in HYBRID_GROUPS, **row})
        facts["signature_algorithms"] = []
        for sigalg in SIGALGS + (SIGALGS_TLS12 if protocol == "TLSv1.2" else ()):
            row = _try(host, port, name, version, timeout_s, budget, _set_sigalgs(sigalg))
            meta["handshakes"] += row["accepted"] is not None or row["reason"] == "timed out"
            row.pop("negotiated", None)
            facts["signature_algorithms"].append({"name": sigalg, **row})
    except Exception as exc:  # noqa: BLE001 - facts are a bonus: what was found so far stands
        meta["error"] = f"{type(exc).__name__}: {exc}"
    return facts
