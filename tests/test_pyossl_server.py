"""The reusable pyOpenSSL test server (tests/pyossl_server.py): its client-certificate option, with a
CA of its own, counted from the server's side (other tests rely on its group and certificate counts:
tests/workers/test_bundled_variants.py)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from OpenSSL import SSL

from tests.pyossl_server import PyOpenSSLServer


def handshake(server: PyOpenSSLServer, cert: tuple | None = None) -> bytes:
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    if cert is not None:
        context.use_certificate_file(str(cert[0]))
        context.use_privatekey_file(str(cert[1]))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.setblocking(True)  # pyOpenSSL raises WantReadError on a socket with a timeout
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 5, 0))
        conn = SSL.Connection(context, sock)
        conn.set_connect_state()
        conn.do_handshake()
        conn.sendall(b"GET /1k HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except (SSL.ZeroReturnError, SSL.SysCallError):
            pass
        return data


def test_a_client_certificate_is_asked_for_verified_against_its_ca_and_counted(tmp_path):
    with PyOpenSSLServer(tmp_path / "optional", client_ca=True) as server:
        issued = server.client_ca.issue("rsa", common_name="alice")
        assert handshake(server, issued).startswith(b"HTTP/1.1 200 OK")
        assert handshake(server).startswith(b"HTTP/1.1 200 OK")  # asked, not required
        seen = server.counters.snapshot()
    assert seen["client_certs"] == {"alice": 1, "none": 1} and seen["requests"] == 2
    with PyOpenSSLServer(tmp_path / "required", client_ca=True, require_client_cert=True) as server:
        assert handshake(server, server.client_ca.issue("ecdsa", common_name="bob")).startswith(
            b"HTTP/1.1 200"
        )
        with pytest.raises(SSL.Error):  # TLS 1.3: the server's alert arrives with the first read
            handshake(server)
        stranger = PyOpenSSLServer(tmp_path / "other", client_ca=True).client_ca.issue("ecdsa")
        with pytest.raises(SSL.Error):
            handshake(server, stranger)  # signed by another CA
        # The server's thread counts a failed handshake after the client has seen its alert.
        deadline = time.monotonic() + 5
        while server.counters.snapshot()["failed"] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = server.counters.snapshot()
    assert seen["client_certs"] == {"bob": 1} and seen["failed"] == 2
    assert any("peer did not return a certificate" in e for e in seen["errors"])
