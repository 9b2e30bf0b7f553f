"""``BundledTLS.read`` / ``write`` call ``SSL_read`` / ``SSL_write`` directly and leave pyOpenSSL to
say why only when nothing was read or written (issue 35). Each outcome the client tells apart must
come out as it did through ``Connection.recv`` / ``send``: the bytes, "would block", the peer's
close_notify (b""), a TCP end without it, a record that does not decrypt, a write to a closed peer.

A real TLS server (Python's ``ssl``, the test's own certificate) on one end of a socket pair, the
bundled client on the other; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading

import pytest

from workers.engine.tls.libraries import BundledTLS, make_context


@pytest.fixture
def pair(tls_cert):
    """(the bundled client's TLS, its socket, the server's SSLSocket) after a full handshake."""
    client_sock, server_sock = socket.socketpair()
    # OpenSSL waits on the client's socket itself: blocking (a timeout would make it non-blocking).
    # Every read below has its bytes, its end or its error already sent.
    server_sock.settimeout(5)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls_cert[0]), str(tls_cert[1]))
    accepted: dict = {}

    def serve() -> None:
        accepted["tls"] = context.wrap_socket(server_sock, server_side=True)

    thread = threading.Thread(target=serve)
    thread.start()
    tls = BundledTLS(make_context("bundled", verify=False), client_sock, "localhost", None)
    tls.do_handshake()  # a blocking socket: OpenSSL waits for the server itself
    thread.join(5)
    server = accepted["tls"]
    yield tls, client_sock, server
    for sock in (server, client_sock):
        sock.close()


def test_reads_return_the_bytes_the_server_wrote_and_keep_their_buffer(pair):
    tls, _, server = pair
    server.sendall(b"hello")
    assert tls.read(65536) == b"hello"
    buffer = tls._buffer
    server.sendall(b"x" * 40_000)  # more than one record
    got = b""
    while len(got) < 40_000:
        got += tls.read(65536)
    assert got == b"x" * 40_000
    assert tls._buffer is buffer  # one buffer per connection, not one per read
    server.sendall(b"abc")
    assert tls.read(2) == b"ab" and tls.pending() == 1 and tls.read(65536) == b"c"


def test_a_read_with_nothing_there_would_block(pair):
    tls, client_sock, _ = pair
    client_sock.setblocking(False)
    with pytest.raises(ssl.SSLWantReadError):
        tls.read(65536)


def test_the_peers_close_notify_reads_as_the_end(pair):
    tls, client_sock, server = pair
    # unwrap sends close_notify, then waits for the client's: in a thread, ended by the client's close.
    closing = threading.Thread(target=lambda: _quietly(server.unwrap))
    closing.start()
    assert tls.read(65536) == b""
    client_sock.close()
    closing.join(5)


def test_a_tcp_end_without_close_notify_is_an_eof_error(pair):
    tls, _, server = pair
    server.sendall(b"last")
    assert tls.read(65536) == b"last"
    socket.socket.shutdown(server, socket.SHUT_WR)  # the TCP end, no TLS alert
    with pytest.raises(ssl.SSLEOFError):
        tls.read(65536)


def test_a_record_that_does_not_decrypt_is_a_tls_error(pair):
    tls, _, server = pair
    # An application-data record (TLS 1.3 outer type 23) of bytes no key made.
    socket.socket.sendall(server, b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
    with pytest.raises(ssl.SSLError) as raised:
        tls.read(65536)
    assert not isinstance(raised.value, ssl.SSLWantReadError | ssl.SSLEOFError)


def test_writes_reach_the_server_and_a_closed_peer_fails_them(pair):
    tls, _, server = pair
    assert tls.write(b"GET / HTTP/1.1\r\n\r\n") == 18
    assert tls.write(memoryview(b"0123456789")[2:6]) == 4  # what sendall passes
    got = b""
    while len(got) < 22:
        got += server.recv(65536)
    assert got == b"GET / HTTP/1.1\r\n\r\n2345"
    server.close()
    with pytest.raises(OSError) as raised:
        for _ in range(100):  # the first writes may still fit the socket's buffer
            tls.write(b"y" * 16_384)
    # The system call's errno, read by pyOpenSSL after the fast path's call: a lost errno would come
    # out as an EOF error (an SSLError) instead.
    assert isinstance(raised.value, BrokenPipeError | ConnectionResetError)


def test_a_write_that_would_block_is_asked_again_with_the_same_bytes(pair):
    tls, client_sock, server = pair
    client_sock.setblocking(False)
    chunk = b"z" * 65_536
    accepted = 0
    with pytest.raises(ssl.SSLWantWriteError):
        for _ in range(1_000):  # until the socket's buffers are full
            accepted += tls.write(chunk)
    received = bytearray()
    total: list[int] = []  # the bytes the client's writes accepted, once they are done
    server.settimeout(0.1)

    def drain() -> None:
        while not total or len(received) < total[0]:
            try:
                received.extend(server.recv(1 << 20))
            except TimeoutError:
                continue

    reader = threading.Thread(target=drain)
    reader.start()
    for _ in range(10_000):  # the retry that CoopConnection makes after waiting for the socket
        try:
            accepted += tls.write(chunk)
            break
        except ssl.SSLWantWriteError:
            reader.join(0.001)
    total.append(accepted)
    reader.join(10)
    assert not reader.is_alive() and len(received) == accepted > len(chunk)
    assert set(received) == {ord("z")}


def _quietly(call) -> None:
    with contextlib.suppress(OSError):  # ssl.SSLError is an OSError
        call()
