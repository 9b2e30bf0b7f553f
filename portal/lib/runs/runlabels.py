"""The labels the run form shows for the choices of ``portal.lib.runs.runspec``'s fields (arms, TLS matrix
dimensions, TLS libraries): words only, kept apart so the spec stays one screen of fields."""

from __future__ import annotations

DIMENSION_LABELS = {
    "protocol": "protocol — TLS 1.2 vs 1.3",
    "group": "group — key exchange X25519 vs P-256 vs X25519MLKEM768 (post-quantum hybrid)",
    "cert": "cert — RSA vs ECDSA certificate (when the server holds both; chosen in TLS 1.2)",
    "resumption": "resumption — none vs session ticket vs session ID",
    "client_cert": "client_cert — no client certificate vs RSA vs ECDSA (mutual TLS; the target's)",
}
TLS_LIBRARY_LABELS = {
    "system": "system — Python's ssl on the operating system's OpenSSL",
    "bundled": "bundled — pyOpenSSL on the OpenSSL the cryptography wheel carries (newer)",
}
ARM_LABELS = {
    "plain": "plain — HTTP, keep-alive (baseline)",
    "tls": "tls — HTTPS, keep-alive (one handshake per user)",
    "plain_new": "plain_new — HTTP, new TCP connection per request (control for tls_new)",
    "tls_new": "tls_new — HTTPS, new connection and full handshake per request",
    "tls_resumed": "tls_resumed — HTTPS, new connection per request, session resumption",
    "tls_mtls": "tls_mtls — as tls_new, presenting the target's client certificate (mutual TLS)",
    "h2": "h2 — HTTPS with HTTP/2 (ALPN h2), keep-alive, up to h2_streams requests in flight per connection",
    "h2_new": "h2_new — HTTPS with HTTP/2, new connection and full handshake per request",
    "h2c": "h2c — HTTP/2 over plain TCP (prior knowledge): control that isolates TLS from HTTP/2",
}
