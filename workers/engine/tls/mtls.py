"""The client-certificate check of the ``tls_mtls`` arm (and of the matrix's ``client_cert``
variants): before anything is measured, one handshake on the run's TLS library presenting the run's
client certificate, with the handshake messages watched, then one request.

Passes when the server asked for a certificate (a CertificateRequest in its handshake), the client
sent one (a non-empty Certificate message) and the server answered the request. Fails
(``Rejected``, the arm's preflight fails with it) when the server did not ask — the arm would
measure ``tls_new`` under another name — or when it rejected the certificate with an alert (in TLS
1.3 the alert comes after the client's Finished, on the first read), saying the server's alert. A
server that accepts the handshake and rejects at the HTTP level (nginx answers 400 "The SSL
certificate error") fails the arm's ordinary preflight request, whose reason shows that answer.

The messages are read through a message callback set on a context made for this check only:
CPython's ``SSLContext._msg_callback`` on the system library, ``SSL_CTX_set_msg_callback`` through
pyOpenSSL's binding on the bundled one; measured connections never carry a callback.
"""

from __future__ import annotations

import socket
import ssl

from workers.engine.tls import libraries

HANDSHAKE, ALERT = 22, 21
CERTIFICATE, CERTIFICATE_REQUEST = 11, 13
EARLY_VERDICT_S = 0.25
NOT_ASKED = (
    "the server did not ask for a client certificate (no CertificateRequest in its handshake), so {arm} "
    "would measure a handshake without one; make it request one (nginx: ssl_verify_client on or "
    "optional, with ssl_client_certificate naming the CA)"
)


class Rejected(Exception):
    """The client certificate was not asked for, not sent or not accepted; the message says which."""


class Messages:
    """Handshake and alert messages of one connection: (direction "read"|"write", content type,
    message type, bytes with the 4-byte handshake header)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, bytes]] = []

    def system(self, conn, direction, version, content_type, msg_type, data) -> None:
        self.seen.append((direction, int(content_type), int(msg_type), bytes(data)))

    def bundled(self, write_p, version, content_type, buf, length, ssl_ptr, arg) -> None:
        data = bytes(libraries._ffi.buffer(buf, length))
        msg_type = data[0] if content_type == HANDSHAKE and data else 0
        self.seen.append(("write" if write_p else "read", content_type, msg_type, data))

    def asked(self) -> bool:
        return any(d == "read" and c == HANDSHAKE and m == CERTIFICATE_REQUEST for d, c, m, _ in self.seen)

    def sent(self) -> bool:
        """Whether the client's Certificate message carried a certificate (an empty one says "none")."""
        for direction, content_type, msg_type, data in self.seen:
            if direction == "write" and content_type == HANDSHAKE and msg_type == CERTIFICATE:
                body = data[4:]
                # TLS 1.3 puts a certificate_request_context (1-byte length) before the 3-byte list.
                tls13 = len(body) > 3 and int.from_bytes(body[0:3], "big") != len(body) - 3
                pos = 1 + body[0] if tls13 and body else 0
                return int.from_bytes(body[pos : pos + 3], "big") > 0
        return False


def check(config, endpoint, kind: str, path: str = "/") -> dict:
    """One handshake presenting the run's ``kind`` ("rsa"|"ecdsa") certificate and one request;
    ``{"requested", "sent", "status"}`` or ``Rejected``."""
    messages = Messages()
    context = libraries.make_context(config.tls_library, config.verify_tls)
    libraries.load_client_cert(context, config.client_certs[kind])
    keep = None
    if isinstance(context, libraries.SSL.Context):
        keep = libraries._ffi.callback(
            "void(int, int, int, const void *, size_t, SSL *, void *)", messages.bundled
        )
        libraries._lib.SSL_CTX_set_msg_callback(context._context, keep)
    else:
        context._msg_callback = messages.system
    raw = socket.create_connection((endpoint.address, endpoint.port), timeout=config.timeout_s)
    head = f"GET {path} HTTP/1.1\r\nHost: {endpoint.host_header}\r\nConnection: close\r\n\r\n".encode()
    status_line = b""
    try:
        if keep is not None:
            sock = libraries.BlockingTLS(context, raw, endpoint.host)
        else:
            sock = context.wrap_socket(raw, server_hostname=endpoint.host)
        # Judged before a request is sent: a server that did not ask gets nothing but a handshake.
        if not messages.asked():
            raise Rejected(NOT_ASKED.format(arm="tls_mtls"))
        if not messages.sent():
            raise Rejected("the server asked for a client certificate but the generator sent none")
        if _closed_early(sock):
            raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "the server closed the connection")
        sock.sendall(head)
        while b"\r\n" not in status_line and (chunk := sock.recv(4096)):
            status_line += chunk
        sock.close()
    except (OSError, ssl.SSLError) as exc:
        raise Rejected(_reason(messages, exc)) from None
    finally:
        raw.close()
        if keep is not None:
            libraries._lib.SSL_CTX_set_msg_callback(context._context, libraries._ffi.NULL)
    parts = status_line.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return {"requested": True, "sent": True, "status": status}


def _closed_early(sock) -> bool:
    """TLS 1.3: the server judges the client's certificate after the client's Finished, so its alert
    comes after the handshake. Wait briefly for it before the request (which, sent into a closing
    connection, can make the server's kernel reset it and lose the alert). True when the server
    closed without a word; an alert raises."""
    bundled = isinstance(sock, libraries.BlockingTLS)
    before = sock.timeout_s if bundled else sock.gettimeout()
    if bundled:
        sock.timeout_s = EARLY_VERDICT_S
    else:
        sock.settimeout(EARLY_VERDICT_S)
    try:
        return sock.recv(1) == b""  # an HTTP server says nothing first: a timeout is the good outcome
    except TimeoutError:
        return False
    finally:
        if bundled:
            sock.timeout_s = before
        else:
            sock.settimeout(before)


def _reason(messages: Messages, exc: BaseException) -> str:
    """Why the exchange failed: the server's alert (said as a rejection of the certificate when it
    had asked for one and got it), or a close right after the certificate, or the error."""
    text = f"{type(exc).__name__}: {exc}"
    asked, sent = messages.asked(), messages.sent()
    if "alert" in text.lower():
        if asked and sent:
            return f"the server rejected the client certificate with an alert: {text}"
        if asked:
            return f"the server asked for a client certificate and ended the handshake with an alert: {text}"
        return f"the server ended the handshake with an alert before asking for a client certificate: {text}"
    if asked and sent and isinstance(exc, ssl.SSLEOFError | ConnectionResetError):
        return (
            "the server closed the connection right after receiving the client certificate, without an "
            f"answer or an alert: it probably rejected it ({text})"
        )
    return f"the handshake presenting the client certificate failed: {text}"
