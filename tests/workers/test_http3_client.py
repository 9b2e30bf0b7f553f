"""The HTTP/3 client (``workers/engine/http/http3``) on plain threads, against a real Caddy with HTTP/3 and
what it logged: per mode the requests, connections, resumptions and 0-RTT answers the server saw
(``request.proto`` ``HTTP/3.0``, ``request.tls.resumed``, and the early-data mark Caddy's ``tls``
matcher sets: ``portal.lib.demo.caddy.EARLY_DATA_HEADER``); 0-RTT accepted, refused and never offered;
groups, verification; refusals within seconds (nothing on the UDP port, nginx without QUIC, a silent
port, a QUIC server without h3); Retry and version negotiation against qh3's own server; loss counted
through a relay that drops every Nth datagram. ``test_http3_gevent.py`` runs it as the engine does.

Each test tags its requests with a query string of its own (Caddy's file server ignores it, its log
keeps it), so one Caddy serves the module and every count is this test's.
"""

from __future__ import annotations

import dataclasses
import socket
import time
import uuid

import pytest

from bench.caddy import Caddy
from bench.nginx import Nginx
from portal.lib.demo.caddy import EARLY_DATA_HEADER
from portal.lib.tls.certs import make_ca, make_self_signed, make_server_cert
from tests.quic_server import QuicServer
from tests.udp_relay import TO_CLIENT, TO_SERVER, UdpRelay
from workers.engine.http.endpoint import Endpoint
from workers.engine.http.http3 import driver
from workers.engine.http.http3.client import H3_ARMS, H3Client, is_zero_rtt
from workers.engine.http.http3.quic import QuicSettings, make_settings

V1, V2 = 0x00000001, 0x6B3343CF


@pytest.fixture(scope="module")
def caddy():
    try:
        server = Caddy(key_types=("ec",), server_ca=make_ca()).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


def endpoint(port: int, host: str = "127.0.0.1", address: str = "127.0.0.1") -> Endpoint:
    return Endpoint("https", host, port, address, f"{host}:{port}")


def client(port: int, arm: str, settings: QuicSettings | None = None, **kwargs) -> H3Client:
    policy, early = H3_ARMS[arm]
    return H3Client(endpoint(port), policy, settings or make_settings(False), early_data=early, **kwargs)


def run(h3: H3Client, n: int, path: str = "/1k") -> list:
    tag = uuid.uuid4().hex[:12]
    target = f"{path}?t={tag}"
    samples = [h3.request(f"https://127.0.0.1:{h3.address[1]}{target}", target) for _ in range(n)]
    h3.close()
    return samples, tag


def served(server: Caddy, tag: str, expected: int) -> list[dict]:
    """The access log's entries of this test's requests, once Caddy has written ``expected`` of them."""
    deadline = time.monotonic() + 5
    while True:
        entries = [e for e in server.access_log_entries() if f"t={tag}" in e["request"]["uri"]]
        if len(entries) >= expected or time.monotonic() > deadline:
            return entries
        time.sleep(0.02)


def early_marked(entry: dict) -> bool:
    return bool(entry.get("resp_headers", {}).get(EARLY_DATA_HEADER))


def assert_early_marks(entries: list[dict], samples: list) -> None:
    """Caddy marks an answer whose handler began before the handshake completed. Every marked answer
    must be one the client counts as 0-RTT; an accepted one whose handler ran just after the client's
    Finished arrived goes unmarked (a race on a busy machine): so some, not necessarily all."""
    marks = [early_marked(e) for e in entries]
    zero_rtt = [is_zero_rtt(s) for s in samples]
    assert len(marks) == len(zero_rtt)
    assert not any(mark and not counted for mark, counted in zip(marks, zero_rtt, strict=True)), marks
    assert any(marks) == any(zero_rtt), (marks, zero_rtt)


def assert_answered(samples, size: int = 1024) -> None:
    assert [(s.status, s.body_bytes, s.error) for s in samples] == [(200, size, None)] * len(samples)
    for s in samples:
        assert 0 < s.ttfb_us <= s.ttlb_us
        assert s.content_type.startswith("text/html")


# -- the four modes, as the server saw them ------------------------------------------------------


def test_h3_keeps_one_connection_and_the_server_saw_http3(caddy):
    ended = []
    samples, tag = run(client(caddy.tls_port, "h3", on_connection_end=ended.append), 4)
    assert_answered(samples)
    first = samples[0]
    assert first.connect_us == 0 and first.tls_handshake_us > 0 and first.alpn == "h3"
    assert first.ttfb_us >= first.tls_handshake_us  # the handshake is inside the first request
    assert first.session_reused is False and first.early_data is None
    assert [s.tls_handshake_us for s in samples[1:]] == [None] * 3  # the same connection
    facts = first.quic
    assert (facts.version, facts.group, facts.alpn) == ("QUICv1", "X25519MLKEM768", "h3")
    assert facts.cipher and facts.handshake_us == first.tls_handshake_us
    assert ended == [facts] and facts.closed and facts.requests == 4
    assert facts.datagrams_sent > 1 and facts.bytes_received > 4 * 1024
    assert (facts.retry, facts.version_negotiation, facts.early_data) == (False, False, None)
    entries = served(caddy, tag, 4)
    assert [e["request"]["proto"] for e in entries] == ["HTTP/3.0"] * 4
    assert {e["request"]["remote_port"] for e in entries} == {entries[0]["request"]["remote_port"]}
    assert [e["request"]["tls"]["resumed"] for e in entries] == [False] * 4
    assert {e["request"]["tls"]["server_name"] for e in entries} == {""}  # no SNI for an IP literal


def test_h3_replaces_a_connection_that_went_idle(caddy):
    """A kept connection idle past its timeout is over (qh3 fires the timer before the next request
    is sent on it): the next request opens another and says so (``reopened``)."""
    ended = []
    settings = dataclasses.replace(make_settings(False), idle_timeout_s=0.3)
    h3 = client(caddy.tls_port, "h3", settings, on_connection_end=ended.append)
    tag = uuid.uuid4().hex[:12]
    target = f"/1k?t={tag}"
    first = h3.request(f"https://127.0.0.1:{caddy.tls_port}{target}", target)
    time.sleep(0.6)
    second = h3.request(f"https://127.0.0.1:{caddy.tls_port}{target}", target)
    h3.close()
    assert_answered([first, second])
    assert (first.reopened, second.reopened) == (False, True)
    assert second.tls_handshake_us and h3.connections_opened == 2
    assert len(ended) == 2 and "Idle timeout" in ended[0].end, ended
    entries = served(caddy, tag, 2)
    assert len({e["request"]["remote_port"] for e in entries}) == 2


def test_h3_new_makes_a_full_handshake_per_request(caddy):
    ended = []
    samples, tag = run(client(caddy.tls_port, "h3_new", on_connection_end=ended.append), 3)
    assert_answered(samples)
    assert [s.session_reused for s in samples] == [False] * 3
    assert all(s.tls_handshake_us and s.ttfb_us >= s.tls_handshake_us for s in samples)
    assert len(ended) == 3 and all(f.closed and f.requests == 1 for f in ended)
    entries = served(caddy, tag, 3)
    assert [(e["request"]["proto"], e["request"]["tls"]["resumed"]) for e in entries] == [
        ("HTTP/3.0", False)
    ] * 3
    assert len({e["request"]["remote_port"] for e in entries}) == 3


def test_h3_resumed_offers_the_previous_ticket_and_no_early_data(caddy):
    samples, tag = run(client(caddy.tls_port, "h3_resumed"), 3)
    assert_answered(samples)
    assert [s.session_reused for s in samples] == [False, True, True]
    assert [s.early_data for s in samples] == [None] * 3
    entries = served(caddy, tag, 3)
    assert [e["request"]["tls"]["resumed"] for e in entries] == [False, True, True]
    assert not any(early_marked(e) for e in entries)  # each request went after its handshake


def test_h3_0rtt_sends_the_request_as_early_data_and_the_server_takes_it(caddy):
    samples, tag = run(client(caddy.tls_port, "h3_0rtt"), 5)
    assert_answered(samples)
    assert [s.early_data for s in samples] == ["no_ticket"] + ["accepted"] * 4
    assert [is_zero_rtt(s) for s in samples] == [False] + [True] * 4
    assert samples[1].quic.first_flight_bytes > samples[0].quic.first_flight_bytes  # the request rode it
    entries = served(caddy, tag, 5)
    assert [e["request"]["tls"]["resumed"] for e in entries] == [False] + [True] * 4
    assert_early_marks(entries, samples)


def test_0rtt_refused_is_flagged_and_never_counted_as_0rtt(caddy):
    """A ticket another server issued: that server's keys cannot open it, so it refuses the early
    data; the library sends the request again after a full handshake."""
    first = client(caddy.tls_port, "h3_0rtt")
    run(first, 1)
    with Caddy(key_types=("ec",)) as other:
        second = client(other.tls_port, "h3_0rtt")
        second.ticket = first.ticket
        samples, tag = run(second, 1)
        assert_answered(samples)
        assert (samples[0].early_data, samples[0].session_reused, is_zero_rtt(samples[0])) == (
            "refused",
            False,
            False,
        )
        [entry] = served(other, tag, 1)
        assert (entry["request"]["proto"], entry["request"]["tls"]["resumed"]) == ("HTTP/3.0", False)
        assert not early_marked(entry)


def test_a_server_with_0rtt_off_gives_no_early_data_and_none_is_counted():
    with Caddy(key_types=("ec",), zero_rtt=False) as server:
        samples, tag = run(client(server.tls_port, "h3_0rtt"), 3)
        assert_answered(samples)
        assert [s.early_data for s in samples] == ["no_ticket"] * 3  # its tickets allow no early data
        assert not any(is_zero_rtt(s) for s in samples)
        assert [s.session_reused for s in samples] == [False, True, True]
        entries = served(server, tag, 3)
        assert [e["request"]["tls"]["resumed"] for e in entries] == [False, True, True]
        assert not any(early_marked(e) for e in entries)


def test_a_server_with_tickets_off_resumes_nothing():
    with Caddy(key_types=("ec",), tickets=False) as server:
        resumed, tag = run(client(server.tls_port, "h3_resumed"), 2)
        early, tag_0rtt = run(client(server.tls_port, "h3_0rtt"), 2)
        assert_answered(resumed + early)
        assert [s.session_reused for s in resumed + early] == [False] * 4
        assert [s.early_data for s in early] == ["no_ticket"] * 2
        entries = served(server, tag, 2) + served(server, tag_0rtt, 2)
        assert [e["request"]["tls"]["resumed"] for e in entries] == [False] * 4


# -- groups and verification ------------------------------------------------------------------------


def test_the_groups_offered_are_the_groups_negotiated(caddy):
    """Caddy prefers X25519MLKEM768: offered alone, X25519 is what it must take; the hybrid's key
    share does not fit one datagram with the rest of the Initial, X25519's does."""
    (hybrid,), _ = run(client(caddy.tls_port, "h3_new"), 1)
    (classic,), _ = run(client(caddy.tls_port, "h3_new", make_settings(False, groups=("x25519",))), 1)
    assert_answered([hybrid, classic])
    assert (hybrid.quic.group, classic.quic.group) == ("X25519MLKEM768", "x25519")
    assert (hybrid.quic.first_flight_datagrams, classic.quic.first_flight_datagrams) == (2, 1)
    assert hybrid.quic.first_flight_bytes > classic.quic.first_flight_bytes >= 1200
    with pytest.raises(ValueError, match="cannot offer the group 'ffdhe2048'"):
        make_settings(False, groups=("ffdhe2048",))


def test_verification_against_the_servers_ca(caddy, tmp_path):
    (ok,), _ = run(client(caddy.tls_port, "h3_new", make_settings(True, str(caddy.ca_file))), 1)
    assert_answered([ok])
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_text(make_ca()[0])
    started = time.monotonic()
    (bad,), _ = run(client(caddy.tls_port, "h3_new", make_settings(True, str(other_ca))), 1)
    assert bad.error == "tls_error" and time.monotonic() - started < 2, bad.error_detail
    assert "TLS alert" in bad.error_detail


def test_a_self_signed_leaf_is_trusted_only_as_the_certificate_served(tmp_path):
    """qh3 2.1 takes the self-signed certificate the server presents as its own anchor (the research
    note said it refuses it: it refused the one the server did not present, as here)."""
    with Caddy(key_types=("ec",)) as server:
        served_leaf = str(server.certs[0][0])
        other_leaf = str(make_self_signed(tmp_path, name="other", key_type="ec")[0])
        (trusted,), _ = run(client(server.tls_port, "h3_new", make_settings(True, served_leaf)), 1)
        (refused,), _ = run(client(server.tls_port, "h3_new", make_settings(True, other_leaf)), 1)
    assert_answered([trusted])
    assert refused.error == "tls_error" and "certificate" in refused.error_detail, refused


def test_an_address_is_checked_against_the_certificate_though_not_sent_as_sni(tmp_path):
    """Without SNI for an IP literal the address is still what the certificate must name: a chain the
    client trusts, for ``localhost`` only, is refused at 127.0.0.1."""
    ca = make_ca()
    cert = make_server_cert(ca, tmp_path, name="named", key_type="ec", sans=("localhost",))
    (tmp_path / "ca.pem").write_text(ca[0])
    with QuicServer(cert) as server:
        settings = make_settings(True, str(tmp_path / "ca.pem"))
        (refused,), _ = run(client(server.port, "h3_new", settings), 1)
        named = H3Client(endpoint(server.port, host="localhost"), H3_ARMS["h3_new"][0], settings)
        (answered,), _ = run(named, 1)
    assert refused.error == "tls_error" and "certificate" in refused.error_detail, refused
    assert (answered.status, answered.error) == (200, None), answered
    assert len(server.served) == 1


def test_only_the_pinned_address_is_used(caddy, monkeypatch):
    """The endpoint's address is where the datagrams go; its host name is only SNI, the certificate
    check and ``:authority``: no name is resolved."""

    def no_lookup(*args, **kwargs):
        raise AssertionError(f"a name lookup: {args}")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    monkeypatch.setattr(socket, "gethostbyname", no_lookup)
    policy, _ = H3_ARMS["h3_new"]
    settings = make_settings(True, str(caddy.ca_file))
    h3 = H3Client(endpoint(caddy.tls_port, host="localhost"), policy, settings)
    (sample,), tag = run(h3, 1)
    assert_answered([sample])
    [entry] = served(caddy, tag, 1)
    assert entry["request"]["host"] == f"localhost:{caddy.tls_port}"
    assert entry["request"]["tls"]["server_name"] == "localhost"


def test_the_udp_port_may_be_another_than_the_urls(caddy):
    """A server's ``Alt-Svc: h3=":PORT"`` may name another port than its TLS URL's: QUIC goes there, the
    request still names the URL's authority."""
    url_port = closed_udp_port()
    policy, _ = H3_ARMS["h3_new"]
    h3 = H3Client(endpoint(url_port), policy, make_settings(False), port=caddy.tls_port)
    (sample,), tag = run(h3, 1)
    assert_answered([sample])
    assert sample.quic.port == caddy.tls_port
    [entry] = served(caddy, tag, 1)
    assert entry["request"]["host"] == f"127.0.0.1:{url_port}"


# -- refused, fast, never over TCP -------------------------------------------------------------------


def closed_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_on_the_udp_port_is_refused_at_once():
    started = time.monotonic()
    (sample,), _ = run(client(closed_udp_port(), "h3_new"), 1)
    assert sample.error == "connection_refused" and time.monotonic() - started < 5, sample
    assert "UDP" in sample.error_detail and "no QUIC server" in sample.error_detail
    facts = sample.quic  # the failed connection's facts: its Initial went out, nothing came back
    assert facts.closed and facts.first_flight_datagrams >= 1 and facts.datagrams_received == 0


def nginx_log_settled(nginx: Nginx) -> list[str]:
    """nginx's access log once its readiness check's line is there and nothing more comes for 0.2 s."""
    deadline = time.monotonic() + 5
    lines = nginx.access_log_lines()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        again = nginx.access_log_lines()
        if again and again == lines:
            break
        lines = again
    return lines


def test_nginx_without_quic_is_refused_and_nothing_goes_over_tcp():
    try:
        nginx = Nginx(access_log_format="$server_protocol $status")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with nginx:
        before = nginx_log_settled(nginx)  # its own readiness check's request
        started = time.monotonic()
        samples, _ = run(client(nginx.tls_port, "h3"), 2)
        assert [s.error for s in samples] == ["connection_refused"] * 2
        assert time.monotonic() - started < 5
        assert nginx_log_settled(nginx) == before


def test_a_silent_udp_port_is_no_answer_within_the_handshake_timeout():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        started = time.monotonic()
        h3 = client(silent.getsockname()[1], "h3_new", handshake_timeout_s=0.5)
        (sample,), _ = run(h3, 1)
        elapsed = time.monotonic() - started
        received = 0
        silent.setblocking(False)
        while True:
            try:
                received += len(silent.recv(65536)) > 0
            except BlockingIOError:
                break
    assert sample.error == "timeout" and "no answer on UDP" in sample.error_detail, sample
    assert 0.5 <= elapsed < 2
    assert received >= 1  # the client did send its Initial there


def test_a_quic_server_without_h3_is_refused(tmp_path):
    cert = make_self_signed(tmp_path, name="quic", key_type="ec")
    with QuicServer(cert, alpn=("hq-interop",)) as server:
        (sample,), _ = run(client(server.port, "h3_new"), 1)
        assert sample.error == "alpn_refused" and "ALPN" in sample.error_detail, sample
        assert server.served == []


# -- what only a QUIC server of our own shows: Retry, version negotiation ----------------------------


def test_a_retry_and_a_version_negotiation_are_recorded(tmp_path):
    cert = make_self_signed(tmp_path, name="quic", key_type="ec")
    with QuicServer(cert, retry=True) as server:
        (sample,), _ = run(client(server.port, "h3_new"), 1)
        assert (sample.status, sample.body_bytes) == (200, 1024), sample
        assert (sample.quic.retry, sample.quic.version_negotiation, sample.quic.version) == (
            True,
            False,
            "QUICv1",
        )
        assert len(server.served) == 1
    both = dataclasses.replace(make_settings(False), versions=(V1, V2))
    with QuicServer(cert, versions=(V2,)) as server:
        (sample,), _ = run(client(server.port, "h3_new", both), 1)
        assert (sample.status, sample.body_bytes) == (200, 1024), sample
        assert (sample.quic.retry, sample.quic.version_negotiation, sample.quic.version) == (
            False,
            True,
            "QUICv2",
        )
        assert [entry["version"] for entry in server.served] == [V2]
        (v1_only,), _ = run(client(server.port, "h3_new"), 1)
        assert v1_only.error is not None and "common protocol version" in v1_only.error_detail


# -- loss --------------------------------------------------------------------------------------------


def test_lost_datagrams_are_recovered_and_counted(caddy):
    """Every 4th datagram dropped each way: every request still answered once, whole; the client's
    losses and probe timeouts counted; the bytes it counted at its socket are the relay's to the byte."""
    ended = []
    with UdpRelay(("127.0.0.1", caddy.tls_port), drop_every=4) as relay:
        samples, tag = run(client(relay.port, "h3", on_connection_end=ended.append), 25, path="/4k")
    assert_answered(samples, size=4096)
    [facts] = ended
    assert relay.dropped[TO_SERVER] >= 5 and relay.dropped[TO_CLIENT] >= 5
    assert facts.packets_lost + facts.pto_count >= 1
    assert (facts.datagrams_sent, facts.bytes_sent) == (relay.datagrams_from_client, relay.bytes_from_client)
    entries = served(caddy, tag, 25)
    assert len(entries) == 25 and {e["request"]["proto"] for e in entries} == {"HTTP/3.0"}


def test_a_late_server_flight_under_0rtt_holds_the_probe(caddy):
    """The server's first datagram at once, the rest of its flight 100 ms later: qh3's probe timeout
    passes while the 0-RTT request waits for 1-RTT keys; held (``Driver._hold_early_probe``), every
    request is answered as 0-RTT."""
    with UdpRelay(("127.0.0.1", caddy.tls_port), hold_after_first_s=0.1) as relay:
        samples, tag = run(client(relay.port, "h3_0rtt"), 3)
    assert_answered(samples)
    assert [s.early_data for s in samples] == ["no_ticket", "accepted", "accepted"]
    assert all(s.quic.probes_held >= 1 for s in samples[1:])
    assert_early_marks(served(caddy, tag, 3), samples)


def test_qh3_still_breaks_on_an_early_probe(caddy, monkeypatch):
    """The library fault the hold works around, still there in this qh3 (the private-API pin's
    version): when this fails, qh3 builds that probe itself and ``_hold_early_probe`` can go."""
    monkeypatch.setattr(driver.Driver, "_hold_early_probe", lambda self, timer_at: timer_at)
    with UdpRelay(("127.0.0.1", caddy.tls_port), hold_after_first_s=0.1) as relay:
        samples, _ = run(client(relay.port, "h3_0rtt"), 3)
    assert samples[0].status == 200
    # The fault needs the probe timer to fire in a narrow window: seen in both later connections
    # almost always, in one of the two once in CI. Its being gone from both is what this test catches.
    broken = [s for s in samples[1:] if s.error is not None]
    assert broken, [(s.error, s.status) for s in samples]
    assert all(s.error == "protocol_error" and "missing OneRtt packet key" in s.error_detail for s in broken)
    assert all(s.status == 200 for s in samples[1:] if s.error is None)
