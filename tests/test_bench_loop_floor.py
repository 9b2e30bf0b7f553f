"""bench/loop_floor.py: the single-loop Python client that bench/generator prints as the floor under
the engine's CPU per request. It must count what the server answered, and nothing but loopback."""

from __future__ import annotations

import socket
import threading

import pytest

from bench import loop_floor
from tests.servers import LocalServer, pages_handler


@pytest.mark.parametrize("engine_record", [False, True])
def test_the_floor_loop_counts_the_answers_the_server_gave(engine_record):
    """Appending a tuple, or recording each answer as the engine does (its ArmRecorder counts the
    window): the same count of answered requests, the warm-up's left out."""
    answered = []

    def counting(request):
        answered.append(request.path)
        return pages_handler(request)

    server = LocalServer(app=counting).start()
    try:
        figures = loop_floor.measure(
            "127.0.0.1", server.port, "/1k", users=2, seconds=0.5, warmup_s=0.3, engine_record=engine_record
        )
    finally:
        server.stop()
    # Every request it counted was answered; the warm-up's were answered too and are not counted.
    assert figures["requests"] > 0 and figures["failures"] == 0 and figures["warmup_s"] == 0.3
    assert figures["engine_record"] is engine_record
    assert figures["requests"] + 10 <= len(answered), (figures["requests"], len(answered))
    assert set(answered) == {"/1k"}
    per_request_us = figures["user_us_per_req"] + figures["sys_us_per_req"]
    assert figures["per_cpu_s"] == pytest.approx(1e6 / per_request_us, rel=0.01)
    assert figures["cpu_s"] == pytest.approx(figures["requests"] * per_request_us / 1e6, rel=0.01, abs=0.002)


def test_a_server_that_closes_the_connection_stops_the_floor_with_the_reason():
    def closing(request):
        return 200, {"Connection": "close"}, b"bye"

    server = LocalServer(app=closing).start()
    try:
        with pytest.raises(loop_floor.FloorFailed, match="the server closed a keep-alive connection"):
            loop_floor.measure("127.0.0.1", server.port, "/", users=1, seconds=0.2, warmup_s=0.1)
    finally:
        server.stop()


@pytest.mark.parametrize("length", [b"", b"Content-Length: 9x\r\n"])
def test_an_answer_without_a_usable_content_length_stops_the_floor_with_the_reason(length):
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_without_length():
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + length + b"\r\nno length")
            conn.recv(4096)  # until the client gives up and closes

    thread = threading.Thread(target=answer_without_length, daemon=True)
    thread.start()
    try:
        with pytest.raises(loop_floor.FloorFailed, match="an answer without Content-Length"):
            loop_floor.measure(
                "127.0.0.1", listener.getsockname()[1], "/", users=1, seconds=0.2, warmup_s=0.1
            )
    finally:
        thread.join(timeout=5)
        listener.close()


def test_the_floor_loop_refuses_anything_but_loopback():
    with pytest.raises(ValueError, match="loopback only"):
        loop_floor.measure("192.0.2.1", 80, "/", users=1, seconds=0.1)


@pytest.mark.parametrize("engine_record", [False, True])
def test_an_answer_other_than_200_is_a_failure_and_one_user_never_stalls(engine_record):
    """With one user, too: the measured loop finds the connection's next request in flight (the
    warm-up once ended before sending it, so that connection stalled and the window lost it)."""
    server = LocalServer(app=lambda request: (503, {"Content-Type": "text/plain"}, b"busy")).start()
    try:
        figures = loop_floor.measure(
            "127.0.0.1", server.port, "/", users=1, seconds=0.3, warmup_s=0.1, engine_record=engine_record
        )
    finally:
        server.stop()
    assert figures["requests"] > 0 and figures["failures"] == figures["requests"]
