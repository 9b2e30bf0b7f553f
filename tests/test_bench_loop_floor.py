"""bench/loop_floor.py: the single-loop Python client that bench/generator prints as the floor under
the engine's CPU per request. It must count what the server answered, and nothing but loopback."""

from __future__ import annotations

import pytest

from bench import loop_floor
from tests.servers import LocalServer, pages_handler


def test_the_floor_loop_counts_the_answers_the_server_gave():
    answered = []

    def counting(request):
        answered.append(request.path)
        return pages_handler(request)

    server = LocalServer(app=counting).start()
    try:
        figures = loop_floor.measure("127.0.0.1", server.port, "/1k", users=2, seconds=0.5)
    finally:
        server.stop()
    # Every request it counted was answered, and the server saw no more than it sent (one per user
    # may still be in flight when the window ends).
    assert figures["requests"] > 0 and figures["failures"] == 0
    assert figures["requests"] <= len(answered) <= figures["requests"] + 2
    assert set(answered) == {"/1k"}
    assert figures["per_cpu_s"] > 0 and figures["cpu_s"] > 0 and figures["ttlb_p50_us"] > 0


def test_the_floor_loop_refuses_anything_but_loopback():
    with pytest.raises(ValueError, match="loopback only"):
        loop_floor.measure("192.0.2.1", 80, "/", users=1, seconds=0.1)
