"""The timed HTTP/1.1 client's framing, on plain threads against real local servers."""

from __future__ import annotations

import pytest

from tests.servers import LocalServer
from workers.engine.client import ARM_POLICIES, Endpoint, TimedClient, make_ssl_context


def chunked(request):
    return (
        200,
        {"Transfer-Encoding": "chunked"},
        b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n",
    )


@pytest.mark.parametrize(
    ("app", "expected_bytes"),
    [
        (lambda request: (200, {}, b"x" * 70_000), 70_000),
        (chunked, 11),
        (lambda request: (204, {}, b""), 0),
    ],
)
def test_body_framing(app, expected_bytes):
    server = LocalServer(app=app).start()
    try:
        client = TimedClient(Endpoint.resolve(server.url("/")), ARM_POLICIES["plain"][1], None)
        first = client.request(server.url("/"), "/")
        second = client.request(server.url("/"), "/")
        client.close()
    finally:
        server.stop()
    for sample in (first, second):
        assert sample.error is None, sample.error_detail
        assert sample.body_bytes == expected_bytes
        assert 0 < sample.ttfb_us <= sample.ttlb_us
    # Keep-alive: the second request reused the first connection.
    assert first.connect_us is not None and second.connect_us is None
    assert server.counters.snapshot()["connections"] == 1


def test_tls_new_policy_opens_a_connection_per_request(tls_server):
    endpoint = Endpoint.resolve(tls_server.url())
    client = TimedClient(endpoint, ARM_POLICIES["tls_new"][1], make_ssl_context(verify=False))
    samples = [client.request(tls_server.url(), "/1k") for _ in range(5)]
    assert all(s.error is None and s.tls_handshake_us > 0 and s.session_reused is False for s in samples)
    # TTLB includes connect and handshake: the user waits for them too.
    assert all(s.ttlb_us >= s.connect_us + s.tls_handshake_us for s in samples)
    assert tls_server.counters.snapshot() == {"connections": 5, "handshakes": 5, "resumed": 0, "requests": 5}


def test_verification_failure_is_reported_not_raised(tls_server):
    endpoint = Endpoint.resolve(tls_server.url())
    client = TimedClient(endpoint, ARM_POLICIES["tls"][1], make_ssl_context(verify=True))
    sample = client.request(tls_server.url(), "/1k")
    assert sample.error == "tls_error"
    assert "CERTIFICATE_VERIFY_FAILED" in sample.error_detail


def test_host_header_keeps_non_default_port():
    assert Endpoint.resolve("http://127.0.0.1:8081/x").host_header == "127.0.0.1:8081"
    assert Endpoint.resolve("https://127.0.0.1/x").host_header == "127.0.0.1"
    assert Endpoint.resolve("http://[::1]:8080/").host_header == "[::1]:8080"
