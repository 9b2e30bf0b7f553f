"""The timed HTTP/1.1 client's framing, on plain threads against real local servers."""

from __future__ import annotations

import time

import pytest

from tests.servers import LocalServer, pages_handler
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
from workers.engine.http.http1 import TimedClient
from workers.engine.tls.libraries import make_context, make_ssl_context


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


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_each_tls_library_keeps_the_tls_policies_on_blocking_sockets(library, tls_server):
    """tls_new: a full handshake per request; tls_resumed: every connection after the first resumes
    the previous one's session, as the server counted."""
    endpoint = Endpoint.resolve(tls_server.url())
    context = make_context(library, verify=False)
    new = TimedClient(endpoint, ARM_POLICIES["tls_new"][1], context)
    fresh = [new.request(tls_server.url(), "/1k") for _ in range(3)]
    resuming = TimedClient(endpoint, ARM_POLICIES["tls_resumed"][1], context)
    resumed = [resuming.request(tls_server.url(), "/1k") for _ in range(3)]
    assert all(s.error is None and s.status == 200 and s.body_bytes == 1024 for s in fresh + resumed)
    assert all(s.ttlb_us >= s.connect_us + s.tls_handshake_us for s in fresh + resumed)
    assert [s.session_reused for s in fresh + resumed] == [False] * 4 + [True] * 2
    assert tls_server.counters.snapshot() == {"connections": 6, "handshakes": 6, "resumed": 2, "requests": 6}


def test_the_bundled_library_checks_the_certificate_and_its_name(tls_server, tls_cert):
    endpoint = Endpoint.resolve(tls_server.url())
    policy = ARM_POLICIES["tls_new"][1]
    unknown = TimedClient(endpoint, policy, make_context("bundled", verify=True)).request(
        tls_server.url(), "/1k"
    )
    assert unknown.error == "tls_error" and "CERTIFICATE_VERIFY_FAILED" in unknown.error_detail
    assert "self-signed" in unknown.error_detail  # OpenSSL's reason, not a generic failure
    trusted = make_context("bundled", verify=True, cafile=str(tls_cert[0]))
    assert TimedClient(endpoint, policy, trusted).request(tls_server.url(), "/1k").status == 200
    # The certificate names localhost, 127.0.0.1 and ::1: another name fails the check.
    other = Endpoint("https", "tollgate.invalid", tls_server.port, "127.0.0.1", "tollgate.invalid")
    wrong = TimedClient(other, policy, trusted).request(tls_server.url(), "/1k")
    assert wrong.error == "tls_error" and "hostname mismatch" in wrong.error_detail


def test_host_header_keeps_non_default_port():
    assert Endpoint.resolve("http://127.0.0.1:8081/x").host_header == "127.0.0.1:8081"
    assert Endpoint.resolve("https://127.0.0.1/x").host_header == "127.0.0.1"
    assert Endpoint.resolve("http://[::1]:8080/").host_header == "[::1]:8080"


@pytest.mark.parametrize("arm", ["plain", "tls"])
def test_a_connection_the_server_ends_after_n_requests_is_reopened_and_said_so(arm, tls_cert):
    server = LocalServer(tls=tls_cert if arm == "tls" else None, max_requests_per_connection=5).start()
    try:
        context = make_ssl_context(verify=False) if arm == "tls" else None
        client = TimedClient(Endpoint.resolve(server.url()), ARM_POLICIES[arm][1], context)
        samples = [client.request(server.url(), "/1k") for _ in range(23)]
        client.close()
    finally:
        server.stop()
    assert all(s.error is None and s.status == 200 for s in samples)
    # Requests 1, 6, 11, 16, 21 opened a connection; all but the first because the server ended one.
    opened = [i for i, s in enumerate(samples) if s.connect_us is not None]
    assert opened == [0, 5, 10, 15, 20] and client.connections_opened == 5
    assert [i for i, s in enumerate(samples) if s.reopened] == [5, 10, 15, 20]
    assert server.counters.snapshot()["connections"] == 5 and server.counters.snapshot()["requests"] == 23
    if arm == "tls":
        assert all(samples[i].tls_handshake_us > 0 for i in opened)
        assert server.counters.snapshot()["handshakes"] == 5


def test_a_connection_the_server_closed_while_idle_is_reopened_and_said_so():
    server = LocalServer(keepalive_timeout_s=0.2).start()
    try:
        client = TimedClient(Endpoint.resolve(server.url()), ARM_POLICIES["plain"][1], None)
        first = client.request(server.url(), "/1k")
        warm = client.request(server.url(), "/1k")
        time.sleep(0.5)  # the server closes the idle connection meanwhile
        after = client.request(server.url(), "/1k")
        client.close()
    finally:
        server.stop()
    assert [s.error for s in (first, warm, after)] == [None, None, None]
    assert (first.reopened, warm.reopened, after.reopened) == (False, False, True)
    assert after.connect_us is not None and server.counters.snapshot()["connections"] == 2


def test_new_connection_arms_and_errors_never_count_as_reopened(tls_server):
    client = TimedClient(
        Endpoint.resolve(tls_server.url()), ARM_POLICIES["tls_new"][1], make_ssl_context(False)
    )
    assert not any(client.request(tls_server.url(), "/1k").reopened for _ in range(3))

    def slow_once(request):
        if request.path == "/slow":
            time.sleep(0.6)
        return pages_handler(request)

    server = LocalServer(app=slow_once).start()
    try:
        client = TimedClient(Endpoint.resolve(server.url()), ARM_POLICIES["plain"][1], None, timeout_s=0.2)
        timed_out = client.request(server.url("/slow"), "/slow")
        next_one = client.request(server.url(), "/1k")
        client.close()
    finally:
        server.stop()
    # The client closed the connection after its own error: the next one is no server's doing.
    assert timed_out.error == "timeout" and next_one.error is None
    assert next_one.connect_us is not None and not next_one.reopened
