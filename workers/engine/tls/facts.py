"""TLS facts from one real handshake: what the server negotiates and what its certificate costs.

``openssl s_client`` tells what Python's ``ssl`` cannot (key-exchange group, peer signature type,
OCSP stapling, every certificate the server sent); Python's ``ssl`` is the fallback when the binary
is missing or fails. Imported inside the engine (gevent-patched), so it uses only the stdlib's
subprocess, socket and ssl, plus ``cryptography`` for the certificates. Never raises for network
errors: the facts come back with ``error`` set.

Resumption is claimed only when it was seen: the probe reconnects offering the first connection's
session (ticket and, in TLS 1.2, session ID) and reports ``session_ticket`` true only when that
reconnect resumed; in TLS 1.2 a second pair of connections without tickets tells whether the server
resumes by session ID alone (``session_id``). A server that issues tickets it cannot take back (a
new ticket key per connection, as Gunicorn's default TLS setup) shows ``session_ticket_issued``
true and ``session_ticket`` false.

What the server accepts — key-exchange groups (hybrids included), signature algorithms, a client
certificate request and its CA names — comes from short handshakes on the bundled library
(``workers/engine/tls/acceptance.py``), after the first handshake worked. ``tls_library`` names the library
of the first handshake (``openssl s_client``'s OpenSSL, or Python's ``ssl``); ``accept_probe`` that
of the accept probe.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from workers.engine.tls import libraries
from workers.engine.tls.acceptance import key_type, server_accepts
from workers.engine.tls.libraries import make_ssl_context

KEYS = (
    "protocol",
    "cipher",
    "group",
    "cert_key_type",
    "cert_key_bits",
    "signature_algorithm",
    "handshake_signature",
    "chain_length",
    "chain_bytes",
    "alpn",
    "ocsp_stapled",
    "session_ticket_issued",
    "session_ticket",
    "session_id",
    "session_resumed",
    "not_after",
    "subject",
    "issuer",
    "verified",
    "source",
    "tls_library",
    "groups",
    "signature_algorithms",
    "client_cert_requested",
    "client_ca_names",
    "client_cert_required",
    "client_cert_alert",
    "accept_probe",
    "error",
)
PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def _empty() -> dict:
    return dict.fromkeys(KEYS)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _cn(name: x509.Name) -> str | None:
    values = name.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(values[0].value) if values else name.rfc4514_string() or None


def certificate_facts(ders: list[bytes]) -> dict:
    """Facts of the chain as sent (leaf first): key, signature, size, expiry."""
    if not ders:
        return {}
    leaf = x509.load_der_x509_certificate(ders[0])
    kind, bits = key_type(leaf.public_key())
    return {
        "cert_key_type": kind,
        "cert_key_bits": bits,
        "signature_algorithm": getattr(
            leaf.signature_algorithm_oid, "_name", leaf.signature_algorithm_oid.dotted_string
        ),
        "chain_length": len(ders),
        "chain_bytes": sum(len(der) for der in ders),
        "not_after": leaf.not_valid_after_utc.isoformat(),
        "subject": _cn(leaf.subject),
        "issuer": _cn(leaf.issuer),
    }


_OPENSSL_BINARY: list[str] = []


def openssl_binary_library() -> dict:
    """``tls_library`` of the ``openssl s_client`` probe: the system's OpenSSL binary (its version may
    differ from the one linked into Python)."""
    if not _OPENSSL_BINARY:
        try:
            out = subprocess.run(  # noqa: S603, S607 - fixed binary and argument
                ["openssl", "version"], capture_output=True, text=True, timeout=5, check=False
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        _OPENSSL_BINARY.append(out or "unknown")
    return {"choice": libraries.SYSTEM, "openssl": _OPENSSL_BINARY[0], "binding": "openssl s_client"}


def _line(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(prefix):
            return stripped[len(prefix) :].strip()
    return None


def parse_s_client(text: str) -> dict:
    """Parse ``openssl s_client -showcerts -status -alpn …`` output (OpenSSL 1.1 and 3.x)."""
    facts = _empty()
    facts["source"] = "openssl s_client"
    facts["tls_library"] = openssl_binary_library()
    new = re.search(r"^New, (\S+), Cipher is (\S+)", text, re.M)
    if new:
        facts["protocol"], facts["cipher"] = new.group(1), new.group(2)
    protocol = _line(text, "Protocol  :") or _line(text, "Protocol :")
    if protocol and (not facts["protocol"] or facts["protocol"].startswith("(")):
        facts["protocol"] = protocol
    cipher = _line(text, "Cipher    :")
    if cipher and not facts["cipher"]:
        facts["cipher"] = cipher
    group = _line(text, "Negotiated TLS1.3 group:")
    if group is None:
        temp = _line(text, "Server Temp Key:")  # "X25519, 253 bits" or "ECDH, prime256v1, 256 bits"
        if temp:
            parts = [p.strip() for p in temp.split(",")]
            group = parts[1] if parts[0] in ("ECDH", "DH") and len(parts) > 2 else parts[0]
            if parts[0] == "DH":
                group = f"DH {parts[-1]}"
    facts["group"] = group
    sig_type, digest = _line(text, "Peer signature type:"), _line(text, "Peer signing digest:")
    if sig_type:
        facts["handshake_signature"] = f"{sig_type}+{digest}" if digest else sig_type
    alpn = _line(text, "ALPN protocol:")
    facts["alpn"] = alpn or None
    if "OCSP Response Status: successful" in text:
        facts["ocsp_stapled"] = True
    elif "OCSP response: no response sent" in text or "OCSP response:" in text:
        facts["ocsp_stapled"] = False
    # Issued, not yet shown to work: session_ticket and session_id come from a reconnect.
    facts["session_ticket_issued"] = any(
        marker in text for marker in ("TLS session ticket:", "TLS session ticket lifetime hint")
    )
    verify = re.search(r"Verify return code: (\d+)", text)
    if verify:
        facts["verified"] = verify.group(1) == "0"
    ders = [
        x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
        for pem in PEM.findall(text.encode())
    ]
    facts.update(certificate_facts(ders))
    return facts


def _tls12_or_older(protocol: str | None) -> bool:
    return protocol in ("TLSv1.2", "TLSv1.1", "TLSv1")


def resumption_facts(
    protocol: str | None, issued: bool, reconnect: Callable[[bool], bool | None]
) -> dict[str, bool | None]:
    """Whether sessions really resume. ``reconnect(tickets)`` makes a first connection and a second
    one offering the first's session, with or without tickets, and says whether the second resumed
    (None: it could not tell). TLS 1.3 resumes by ticket only; TLS 1.2 also by session ID, tried on
    its own when the server issues tickets (else the first reconnect tried exactly that)."""
    resumed = reconnect(True)
    facts: dict[str, bool | None] = {
        "session_resumed": resumed,
        "session_ticket": None if resumed is None else bool(issued and resumed),
    }
    if _tls12_or_older(protocol):
        facts["session_id"] = reconnect(False) if issued else resumed
    return facts


def _probe_openssl(
    host: str, port: int, server_name: str | None, verify: bool, timeout_s: float, cafile: str | None
) -> dict:
    command = [
        "openssl",
        "s_client",
        "-connect",
        f"{host}:{port}",
        "-alpn",
        "http/1.1",
        # Keep reading after our request until the server closes (it was asked to), so the TLS 1.3
        # NewSessionTicket messages that follow the handshake are seen (and saved by -sess_out).
        "-ign_eof",
    ]
    if server_name and not _is_ip(server_name):
        command += ["-servername", server_name]
    else:
        command += ["-noservername"]
    if verify:
        command += ["-CAfile", cafile] if cafile else []
        if server_name:
            command += ["-verify_ip" if _is_ip(server_name) else "-verify_hostname", server_name]
    host_header = server_name or host
    # A request after the handshake makes the client read the TLS 1.3 NewSessionTicket messages.
    request = f"HEAD / HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\r\n".encode()

    def s_client(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603 - fixed binary, arguments from a parsed URL
            [*command, *extra], input=request, capture_output=True, timeout=timeout_s, check=False
        )

    with tempfile.TemporaryDirectory(prefix="tollgate-tls-") as tmp:
        first = Path(tmp) / "first.session"
        proc = s_client("-status", "-showcerts", "-sess_out", str(first))
        text = proc.stdout.decode("utf-8", "replace")
        if "CONNECTED(" not in text or not PEM.search(proc.stdout):
            reason = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ConnectionError(reason[-1] if reason else f"openssl s_client exited with {proc.returncode}")
        facts = parse_s_client(text)

        def reconnect(tickets: bool) -> bool | None:
            flags = () if tickets else ("-no_ticket",)
            saved = first if tickets else Path(tmp) / "no-ticket.session"
            try:
                if not tickets:
                    s_client(*flags, "-sess_out", str(saved))
                if not saved.exists():
                    return False  # the server gave no session to offer back
                again = s_client(*flags, "-sess_in", str(saved)).stdout.decode("utf-8", "replace")
            except (OSError, subprocess.SubprocessError):
                return None  # the first handshake's facts stand; resumption stays unknown
            if "CONNECTED(" not in again:
                return None
            return re.search(r"^Reused, ", again, re.M) is not None

        facts.update(resumption_facts(facts["protocol"], bool(facts["session_ticket_issued"]), reconnect))
    if not verify:
        facts["verified"] = None  # not asked: the chain was not checked against a trust store
    return facts


def _python_connection(
    host: str, port: int, server_name: str, context: ssl.SSLContext, timeout_s: float, session=None
) -> tuple[dict, ssl.SSLSession | None, bool]:
    """One connection with a HEAD request, read to the end (TLS 1.3 tickets arrive after the
    handshake): its facts, its session and whether it resumed ``session``."""
    with (
        socket.create_connection((host, port), timeout=timeout_s) as raw,
        context.wrap_socket(raw, server_hostname=server_name, session=session) as sock,
    ):
        info = {
            "protocol": sock.version(),
            "cipher": sock.cipher()[0],
            "alpn": sock.selected_alpn_protocol(),
            "der": sock.getpeercert(binary_form=True),
        }
        sock.sendall(f"HEAD / HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n\r\n".encode())
        try:
            while sock.recv(65536):
                pass
        except (OSError, ssl.SSLError):
            pass
        return info, sock.session, sock.session_reused


def _probe_python(
    host: str, port: int, server_name: str | None, verify: bool, timeout_s: float, cafile: str | None
) -> dict:
    facts = _empty()
    facts["source"] = "python ssl"
    facts["tls_library"] = libraries.describe(libraries.SYSTEM)
    name = server_name or host
    context = make_ssl_context(verify, cafile)  # the engine's own client context
    info, session, _ = _python_connection(host, port, name, context, timeout_s)
    der = info.pop("der")
    facts.update(info)
    facts["session_ticket_issued"] = bool(session and session.has_ticket)
    facts["verified"] = True if verify else None

    def reconnect(tickets: bool) -> bool | None:
        ctx, offered = context, session
        try:
            if not tickets:
                ctx = make_ssl_context(verify, cafile)
                ctx.options |= ssl.OP_NO_TICKET
                offered = _python_connection(host, port, name, ctx, timeout_s)[1]
            if offered is None:
                return False  # the server gave no session to offer back
            return _python_connection(host, port, name, ctx, timeout_s, offered)[2]
        except (OSError, ssl.SSLError, ValueError):
            return None  # the first handshake's facts stand; resumption stays unknown

    facts.update(resumption_facts(facts["protocol"], facts["session_ticket_issued"], reconnect))
    facts.update(certificate_facts([der] if der else []))
    # Python sees only the leaf: the rest of the chain is unknown here.
    facts["chain_length"] = None
    facts["chain_bytes"] = None
    return facts


def handshake_facts(
    host: str,
    port: int,
    *,
    server_name: str | None,
    verify: bool,
    timeout_s: float = 10.0,
    cafile: str | None = None,
    accepts: bool = True,
) -> dict:
    """A handshake with host:port (an address; ``server_name`` for SNI and checks), and reconnects
    that try to resume its session → TLS facts; with ``accepts``, then what the server accepts
    (``acceptance.server_accepts``: a short handshake per candidate group and signature algorithm)."""
    first_error = None
    facts = None
    if shutil.which("openssl"):
        try:
            facts = _probe_openssl(host, port, server_name, verify, timeout_s, cafile)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            first_error = f"openssl s_client: {type(exc).__name__}: {exc}"
    try:
        if facts is None:
            facts = _probe_python(host, port, server_name, verify, timeout_s, cafile)
            if first_error:
                facts["error"] = first_error
        if accepts:
            facts.update(
                server_accepts(
                    host, port, server_name=server_name, protocol=facts["protocol"], timeout_s=timeout_s
                )
            )
        return facts
    except (OSError, ssl.SSLError, ValueError) as exc:
        facts = _empty()
        facts["error"] = "; ".join(filter(None, [first_error, f"{type(exc).__name__}: {exc}"]))
        return facts
