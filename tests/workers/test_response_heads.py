"""A response head is read once per distinct head and then looked up by its bytes (``read_head``,
issue 35): what the client does with an answer must not depend on whether its head was seen before.
The answers come from a hand-made server on loopback, byte for byte as written here."""

from __future__ import annotations

import contextlib
import socket

import pytest

from tests.servers import _RawServer
from workers.engine.http import http1
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
from workers.engine.http.http1 import TimedClient, read_head

ANSWERS = {
    "/bad-length": b"HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\nhello world!",
    "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Type: text/plain\r\n\r\n"
    b"5\r\nhello\r\n0\r\n\r\n",
    "/moved": b"HTTP/1.1 302 Found\r\nLocation: /there\r\nServer: raw/1\r\nContent-Length: 0\r\n\r\n",
    "/gz": b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
}


class ScriptedServer(_RawServer):
    """Each request on one connection after another, answered with ``ANSWERS[path]``; a HEAD gets the
    same head and no body."""

    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            while request := conn.recv(65536):
                method, path = request.split(b" ")[:2]
                answer = ANSWERS[path.decode()]
                if method == b"HEAD":
                    answer = answer.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
                conn.sendall(answer)


@pytest.fixture
def client():
    server = ScriptedServer().start()
    client = TimedClient(Endpoint.resolve(server.url("/")), ARM_POLICIES["plain"][1], None)
    yield client, server
    client.close()
    server.stop()


def test_the_same_answers_whether_their_heads_were_read_before(client):
    client, server = client
    http1._HEADS.clear()
    for round_ in ("first", "known"):  # each head read, then looked up
        samples = {path: client.request(server.url(path), path) for path in ("/chunked", "/moved", "/gz")}
        chunked, moved, gz = samples["/chunked"], samples["/moved"], samples["/gz"]
        assert (chunked.status, chunked.body_bytes, chunked.content_type) == (200, 5, "text/plain"), round_
        assert (moved.status, moved.body_bytes, moved.location, moved.server) == (302, 0, "/there", "raw/1")
        assert (gz.status, gz.body_bytes, gz.content_encoding, gz.location) == (200, 3, "gzip", None)
        assert all(s.error is None for s in samples.values())
    assert len(http1._HEADS) == 3
    assert client.connections_opened == 1  # every answer was framed right: the connection went on


def test_a_bad_content_length_fails_the_answer_that_needs_it_every_time(client):
    client, server = client
    first = client.request(server.url("/bad-length"), "/bad-length")
    again = client.request(server.url("/bad-length"), "/bad-length")  # its head known by now
    for sample in (first, again):
        assert sample.error == "protocol_error" and "bad Content-Length" in sample.error_detail
    # A HEAD answer has no body to frame: the same head is no error there.
    head = client.request(server.url("/bad-length"), "/bad-length", method="HEAD")
    assert head.error is None and head.status == 200 and head.body_bytes == 0


def test_read_head_keeps_one_reading_per_distinct_head():
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close"
    first = read_head(raw)
    assert read_head(bytes(bytearray(raw))) is first  # another bytes object, the same head
    assert (first.status, first.keep_alive, first.length, first.chunked, first.bad_length) == (
        200,
        False,
        7,
        False,
        False,
    )
    assert first.noted == (None, None, "", "")
    with pytest.raises(http1.ProtocolError):
        read_head(b"SPDY/3 200 OK")
    assert http1.parse_head("HTTP/1.0 204 No Content\r\nX-A: b") == (204, False, {"x-a": "b"})


def test_a_head_split_over_two_reads_is_read_whole():
    server = _SplitHeadServer().start()
    try:
        client = TimedClient(Endpoint.resolve(server.url("/")), ARM_POLICIES["plain"][1], None)
        sample = client.request(server.url("/"), "/")
        client.close()
    finally:
        server.stop()
    assert sample.error is None and (sample.status, sample.body_bytes, sample.server) == (200, 2, "split")


class _SplitHeadServer(_RawServer):
    def handle(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            conn.recv(65536)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.sendall(b"HTTP/1.1 200 OK\r\nServer: sp")
            self.stopping.wait(0.05)
            conn.sendall(b"lit\r\nContent-Length: 2\r\n\r\nok")
            conn.recv(65536)
