"""Gunicorn settings for the demo target's TLS port: sessions resume, and the server counts them.

Gunicorn builds a new ``SSLContext`` for every connection (``gunicorn.sock.ssl_wrap_socket``: it
loads the certificate and key each time), so the session-ticket keys and the session cache die with
the connection and no client can ever resume: the demo's ``tls_resumed`` arm would measure full
handshakes, and every handshake would also pay for reading the key from disk. The ``ssl_context``
hook below keeps one context per worker process instead, as nginx keeps one per server (TLS 1.3
tickets and TLS 1.2 session IDs then resume).

``post_request`` counts, on the server's side, the TLS connections this worker served and how many
of them resumed a session; the demo site answers them at ``/tls-sessions``, so a test (or a curious
user) checks resumption against what the server saw, not what the client says.

Loaded with ``gunicorn -c python:portal.lib.demo.gunicorn_tls`` (``portal.console.demo``).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable

_lock = threading.Lock()
_contexts: dict[tuple, ssl.SSLContext] = {}
_counts = {"handshakes": 0, "resumed": 0}


def ssl_context(conf, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """Gunicorn's hook, called for every connection: the worker's one context for these settings."""
    key = (conf.certfile, conf.keyfile, conf.ca_certs, conf.cert_reqs, conf.ciphers)
    with _lock:  # gthread wraps sockets in several threads; two contexts would split the tickets
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = default_ssl_context_factory()
    return context


def post_request(worker, req, environ: dict, resp) -> None:
    """Gunicorn's hook after each request: the first request of a TLS connection counts it."""
    sock = environ.get("gunicorn.socket")
    if getattr(req, "req_number", None) != 1 or not isinstance(sock, ssl.SSLSocket):
        return
    with _lock:
        _counts["handshakes"] += 1
        _counts["resumed"] += int(sock.session_reused)


def tls_sessions() -> dict[str, int]:
    """TLS connections this worker process served (with at least one request) and resumed."""
    with _lock:
        return dict(_counts)
