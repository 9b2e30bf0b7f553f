"""The HTTP/3 arms (``h3``, ``h3_new``, ``h3_resumed``, ``h3_0rtt``) measured by the real engine end to
end, each run checked against what the server saw: Caddy's JSON access log (``request.proto``
``HTTP/3.0``, ``tls.resumed``, its early-data mark), with 0-RTT on and off and tickets off; nginx (no
QUIC) for the refusal; a relay that drops every Nth datagram for the loss counters; a TCP server whose
``Alt-Svc`` names another UDP port for the discovery (docs/engine-protocol.md, "HTTP/3")."""

from __future__ import annotations

import time

import pytest

from bench.caddy import Caddy
from portal.lib.demo.caddy import EARLY_DATA_HEADER
from tests.conftest import run_engine
from tests.engine_config import engine_config
from tests.servers import LocalServer, pages_handler
from tests.stacks import start
from tests.udp_relay import UdpRelay

H3_ARMS = ("h3", "h3_new", "h3_resumed", "h3_0rtt")
QUIC_KEYS = {
    "port",
    "discovered_by",
    "alt_svc",
    "connections",
    "versions",
    "alpn",
    "groups",
    "ciphers",
    "resumed",
    "retry",
    "version_negotiation",
    "early_data",
    "datagrams_sent",
    "datagrams_received",
    "bytes_sent",
    "bytes_received",
    "packets_lost",
    "pto_count",
    "first_flight_bytes_max",
    "first_flight_datagrams_max",
    "handshake_bytes_sent",
    "handshake_bytes_received",
    "streams_reset",
    "closed_by_server",
}


def caddy_or_skip(**kwargs) -> Caddy:
    try:
        return Caddy(key_types=("ec",), **kwargs).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def run(arms: dict[str, str], **overrides) -> tuple[dict[str, dict], list[dict]]:
    config = engine_config(arms, **{"users": 2, "warmup_s": 0.3, "duration_s": 1.0, **overrides})
    messages, code, stderr = run_engine(config)
    assert code == 0, stderr[-3000:]
    return {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}, messages


def arm_urls(server: Caddy, arms=H3_ARMS) -> dict[str, str]:
    """Each arm on its own query string, so the access log tells its requests apart."""
    return {arm: server.tls_url(f"/1k?arm={arm}") for arm in arms}


def logged(server: Caddy, arm: str, at_least: int) -> list[dict]:
    """The access log's entries of ``arm``'s requests, once Caddy has written ``at_least`` of them."""
    deadline = time.monotonic() + 5
    while True:
        entries = [e for e in server.access_log_entries() if e["request"]["uri"] == f"/1k?arm={arm}"]
        if len(entries) >= at_least or time.monotonic() > deadline:
            return entries
        time.sleep(0.05)


def assert_measured(result: dict) -> None:
    assert result["requests"] > 0 and result["failures"] == 0, result["errors"]
    assert set(result["quic"]) == QUIC_KEYS
    assert result["http2"] is None


def test_the_four_arms_against_caddy_as_its_access_log_saw_them():
    server = caddy_or_skip()
    try:
        results, messages = run(arm_urls(server), h2_streams=2)
        entries = {arm: logged(server, arm, results[arm]["requests"]) for arm in H3_ARMS}
    finally:
        server.stop()
    assert not [m for m in messages if m["type"] in ("refused", "arm_error")]
    for arm in H3_ARMS:
        result, seen = results[arm], entries[arm]
        assert_measured(result)
        quic = result["quic"]
        # The server answered at least every request the report counts over HTTP/3; over TCP only the
        # preflight's one request for the Alt-Svc header (once for the four arms, with the first's URL).
        over_h3 = [e for e in seen if e["request"]["proto"] == "HTTP/3.0"]
        assert len(over_h3) >= result["requests"], arm
        assert len(seen) - len(over_h3) == (arm == "h3"), arm
        assert (quic["port"], quic["discovered_by"]) == (server.tls_port, "url")
        assert f':{server.tls_port}"' in quic["alt_svc"]  # Caddy's Alt-Svc, as the preflight saw it
        assert quic["bytes_sent"] > 0 and quic["bytes_received"] > result["requests"] * 1024
        assert quic["datagrams_received"] > 0 and quic["retry"] == quic["version_negotiation"] == 0
    entries = {arm: [e for e in seen if e["request"]["proto"] == "HTTP/3.0"] for arm, seen in entries.items()}
    h3, new, resumed, zero = (results[arm] for arm in H3_ARMS)
    # h3: the users' connections were opened in the warm-up; the window saw none open.
    assert h3["connections_opened"] == 0 and h3["quic"]["connections"] == 0
    assert h3["hist"]["tls_handshake_us"] is None
    for result in (new, resumed, zero):
        quic = result["quic"]
        assert quic["connections"] == result["connections_opened"] == result["requests"]
        assert quic["versions"] == {"1": quic["connections"]} and quic["alpn"] == {"h3": quic["connections"]}
        assert quic["groups"] == {"X25519MLKEM768": quic["connections"]}  # qh3's default offer
        assert quic["first_flight_bytes_max"] >= 1200  # an Initial is padded to 1,200 bytes at least
        assert quic["handshake_bytes_sent"] > 0 and quic["handshake_bytes_received"] > 0
        assert result["hist"]["tls_handshake_us"] and result["hist"]["connect_us"]
    assert new["tls_sessions_reused"] == new["quic"]["resumed"] == 0
    assert not any(e["request"]["tls"]["resumed"] for e in entries["h3_new"])
    assert resumed["tls_sessions_reused"] == resumed["quic"]["resumed"] == resumed["connections_opened"]
    assert resumed["quic"]["early_data"] == {"accepted": 0, "refused": 0, "no_ticket": 0}
    # The server resumed at least the connections the report counts as resumed (each user's first
    # connection, and the preflight's, had no ticket yet).
    for arm in ("h3_resumed", "h3_0rtt"):
        resumed_seen = sum(bool(e["request"]["tls"]["resumed"]) for e in entries[arm])
        result = results[arm]
        assert resumed_seen >= result["tls_sessions_reused"] > 0, arm
        # ... and made full handshakes no more often than the report says (+ the unmeasured requests).
        full = result["connections_opened"] - result["tls_sessions_reused"]
        unmeasured = result["warmup_requests"] + result["unwindowed_requests"] + 1
        assert len(entries[arm]) - resumed_seen <= full + unmeasured, arm
    early = zero["quic"]["early_data"]
    assert early["accepted"] > 0 and early["refused"] == 0
    assert sum(early.values()) == zero["quic"]["connections"]
    assert zero["tls_sessions_reused"] == zero["quic"]["resumed"] >= early["accepted"]
    # Caddy marks an answer whose handler began before the handshake completed: 0-RTT ones, some of them.
    marked = [e for e in entries["h3_0rtt"] if e.get("resp_headers", {}).get(EARLY_DATA_HEADER)]
    unmeasured = zero["warmup_requests"] + zero["unwindowed_requests"] + 1  # + the preflight's
    assert 0 < len(marked) <= early["accepted"] + unmeasured
    assert not any(e.get("resp_headers", {}).get(EARLY_DATA_HEADER) for e in entries["h3_resumed"])


def test_0rtt_off_gives_no_early_data_and_tickets_off_no_resumption():
    no_0rtt = caddy_or_skip(zero_rtt=False)
    no_tickets = caddy_or_skip(tickets=False)
    try:
        off, _ = run({"h3_0rtt": no_0rtt.tls_url("/1k?arm=h3_0rtt")})
        off_seen = logged(no_0rtt, "h3_0rtt", off["h3_0rtt"]["requests"])
        urls = arm_urls(no_tickets, ("h3_resumed", "h3_0rtt"))
        none, _ = run(urls)
        none_seen = logged(no_tickets, "h3_resumed", none["h3_resumed"]["requests"])
    finally:
        no_0rtt.stop()
        no_tickets.stop()
    result = off["h3_0rtt"]
    assert_measured(result)
    # Its tickets allow no early data: every request waited for its (resumed) handshake; none is 0-RTT.
    quic = result["quic"]
    assert quic["early_data"] == {"accepted": 0, "refused": 0, "no_ticket": quic["connections"]}
    assert quic["resumed"] == result["tls_sessions_reused"] > 0
    assert len(off_seen) >= result["requests"]
    assert not any(e.get("resp_headers", {}).get(EARLY_DATA_HEADER) for e in off_seen)
    for arm in ("h3_resumed", "h3_0rtt"):
        assert_measured(none[arm])
        assert none[arm]["tls_sessions_reused"] == none[arm]["quic"]["resumed"] == 0
    assert none["h3_0rtt"]["quic"]["early_data"]["no_ticket"] == none["h3_0rtt"]["quic"]["connections"]
    assert not any(e["request"]["tls"]["resumed"] for e in none_seen)


def test_nginx_without_quic_refuses_the_h3_arms_within_seconds_and_measures_the_rest():
    with start("nginx") as server:
        url = server.tls_url()
        arms = {"tls": url, **dict.fromkeys(H3_ARMS, url)}
        t0 = time.monotonic()
        results, messages = run(arms)
        took_s = time.monotonic() - t0
        served = server.served()
    refused = {m["arm"]: m["reason"] for m in messages if m["type"] == "refused"}
    assert set(refused) == set(H3_ARMS) and set(results) == {"tls"}
    port = url.rsplit(":", 1)[1].split("/")[0]
    for arm, reason in refused.items():
        assert reason.startswith(f"{arm} refused: ")
        assert f"UDP port {port}" in reason and "no QUIC there" in reason, reason
    # Found once for the four arms: the ICMP answer is immediate; the whole run is its one arm's.
    assert took_s < 15
    assert {s.proto for s in served} == {"HTTP/1.1"}  # never measured over TCP instead


def test_a_filtered_udp_port_refuses_after_the_handshake_timeout(tls_cert):
    """No ICMP, no answer (a relay to a port nobody listens on, dropping everything): refused after 3 s."""
    tcp = LocalServer(tls=tls_cert).start()
    try:
        with UdpRelay(("127.0.0.1", 9), drop_every=1) as relay:
            arms = {"h3_new": f"https://127.0.0.1:{relay.port}/1k", "tls": f"https://127.0.0.1:{tcp.port}/1k"}
            results, messages = run(arms)
    finally:
        tcp.stop()
    (reason,) = [m["reason"] for m in messages if m["type"] == "refused"]
    assert f"no answer on UDP port {relay.port} within 3 s (no QUIC there)" in reason
    assert set(results) == {"tls"}


def test_the_alt_svc_port_is_used_when_the_urls_udp_port_has_no_quic(tls_cert):
    """The URL names a TCP server that says ``Alt-Svc: h3=":<caddy>"``: the arm measures Caddy's QUIC."""
    server = caddy_or_skip()
    alt_svc = f'h3=":{server.tls_port}"; ma=60'

    def with_alt_svc(request):
        status, headers, body = pages_handler(request)
        return status, {**headers, "Alt-Svc": alt_svc}, body

    try:
        tcp = LocalServer(tls=tls_cert, app=with_alt_svc).start()
        try:
            results, _ = run({"h3_new": f"https://127.0.0.1:{tcp.port}/1k?arm=h3_new"})
        finally:
            tcp.stop()
        seen = logged(server, "h3_new", results["h3_new"]["requests"])
    finally:
        server.stop()
    result = results["h3_new"]
    assert_measured(result)
    quic = result["quic"]
    assert (quic["port"], quic["discovered_by"], quic["alt_svc"]) == (server.tls_port, "alt-svc", alt_svc)
    assert len(seen) >= result["requests"] and {e["request"]["proto"] for e in seen} == {"HTTP/3.0"}


def test_a_relay_dropping_every_7th_datagram_shows_losses_in_result_quic():
    server = caddy_or_skip()
    try:
        with UdpRelay(("127.0.0.1", server.tls_port), drop_every=7) as relay:
            url = f"https://127.0.0.1:{relay.port}/1k?arm=h3"  # UDP to the relay (no TCP there)
            results, messages = run({"h3": url}, users=1, h2_streams=4, timeout_s=5)
            dropped = sum(relay.dropped.values())
    finally:
        server.stop()
    refused = [m for m in messages if m["type"] == "refused"]
    assert not refused, refused
    quic = results["h3"]["quic"]
    assert results["h3"]["requests"] > 0 and dropped > 0
    assert quic["packets_lost"] > 0 or quic["pto_count"] > 0, quic


def test_the_matrix_group_dimension_repeats_h3_new_per_group():
    """``h3_new@<group>``: each sub-arm offers its one group; what Caddy chose is read from the
    ServerHello, and the hybrid's key share makes the client's first flight the largest."""
    server = caddy_or_skip()
    try:
        url = server.tls_url("/1k?arm=matrix")
        results, messages = run({"tls_new": url, "h3_new": url}, tls_matrix=["group"], duration_s=0.5)
    finally:
        server.stop()
    (probes,) = [m["variants"] for m in messages if m["type"] == "matrix" and m["arm"] == "h3_new"]
    by_name = {p["name"]: p for p in probes}
    assert set(by_name) == {"h3_new@x25519", "h3_new@p256", "h3_new@mlkem"}
    expected = {"h3_new@x25519": "x25519", "h3_new@p256": "secp256r1", "h3_new@mlkem": "X25519MLKEM768"}
    for name, group in expected.items():
        probe = by_name[name]
        assert probe["status"] == "measured", probe
        assert (probe["negotiated"]["group"], probe["negotiated"]["protocol"]) == (group, "TLSv1.3")
        result = results[name]
        assert_measured(result)
        assert (
            result["quic"]["groups"] == {group: result["quic"]["connections"]}
            and result["connections_opened"]
        )
    flights = {name: results[name]["quic"]["first_flight_bytes_max"] for name in expected}
    assert flights["h3_new@mlkem"] > flights["h3_new@x25519"]
    # The TLS arms' variants are the TCP ones (tls_new@…), never QUIC.
    assert results["tls_new@x25519"]["quic"] is None


@pytest.mark.django_db(transaction=True)
def test_the_outbound_policy_refuses_an_h3_arm_at_run_start_and_nothing_goes_over_udp(owner, settings):
    """UDP goes where TCP goes: the h3 arm's https URL is checked and pinned by the worker like any arm's;
    an address the operator does not allow fails the run before a datagram is sent."""
    from portal.projects.models import personal_project
    from portal.runs import services
    from portal.runs.models import Run
    from portal.targets.models import Target
    from workers import runner

    server = caddy_or_skip()
    try:
        url = server.tls_url("/1k?arm=h3_new")
        target = Target.objects.create(project=personal_project(owner), name="t", tls_url=url)
        run_ = services.create_run(owner, target, engine_config({"h3_new": url}, arrival_rate=60))
        settings.TOLLGATE_ALLOW_NETWORKS = []  # loopback is not allowed any more
        run_ = runner.execute_run(run_.pk)
        time.sleep(0.3)
        seen = [e for e in server.access_log_entries() if e["request"]["uri"] == "/1k?arm=h3_new"]
    finally:
        server.stop()
    assert run_.status == Run.Status.FAILED
    assert run_.error.startswith(f"refused by the outbound address policy: {url}: 127.0.0.1 is a loopback")
    assert seen == [] and not run_.arms.exists()


def test_a_distributed_run_merges_quic_over_its_generators():
    server = caddy_or_skip()
    try:
        results, messages = run(arm_urls(server, ("h3_new", "h3_0rtt")), generators=2, users=4)
        seen = {arm: logged(server, arm, results[arm]["requests"]) for arm in ("h3_new", "h3_0rtt")}
    finally:
        server.stop()
    for arm in ("h3_new", "h3_0rtt"):
        result = results[arm]
        assert_measured(result)
        assert len(result["generators"]) == 2 and all(g["requests"] > 0 for g in result["generators"])
        quic = result["quic"]
        # Each generator's connections added: one per request, as the server saw them.
        assert quic["connections"] == result["connections_opened"] == result["requests"]
        assert sum(quic["groups"].values()) == sum(quic["versions"].values()) == quic["connections"]
        h3_seen = [e for e in seen[arm] if e["request"]["proto"] == "HTTP/3.0"]
        assert len(h3_seen) >= result["requests"]
    early = results["h3_0rtt"]["quic"]["early_data"]
    assert sum(early.values()) == results["h3_0rtt"]["quic"]["connections"] and early["accepted"] > 0


def test_merge_quic_adds_counters_and_merges_counts():
    from portal.lib.stats.generators import merge_quic  # the engine's distributed merge (merge_results)

    one = {"port": 8443, "discovered_by": "url", "alt_svc": None, "connections": 2, "groups": {"x25519": 2}}
    one |= {"early_data": {"accepted": 1, "refused": 1, "no_ticket": 0}, "first_flight_bytes_max": 1250}
    two = {
        **one,
        "connections": 3,
        "groups": {"x25519": 1, "X25519MLKEM768": 2},
        "first_flight_bytes_max": 2560,
    }
    merged = merge_quic([one, None, two])
    assert merged["connections"] == 5 and merged["groups"] == {"x25519": 3, "X25519MLKEM768": 2}
    assert merged["early_data"] == {"accepted": 2, "refused": 2, "no_ticket": 0}
    assert merged["first_flight_bytes_max"] == 2560 and merged["port"] == 8443
    assert merge_quic([None, None]) is None


def test_alt_svc_ports_are_the_same_hosts_h3_entries():
    from workers.engine.discovery import alt_svc_ports

    assert alt_svc_ports('h3=":8443"; ma=2592000, h3-29=":8443"', 443) == [8443]
    assert alt_svc_ports('h3=":443"; ma=60', 443) == []  # the URL's own port: tried already
    assert alt_svc_ports('h3="other.example:8443", h3=":9443"', 443) == [9443]  # another host: never
    assert alt_svc_ports('h2=":8443"', 443) == [] and alt_svc_ports(None, 443) == []


def test_an_h3_certificate_that_does_not_verify_fails_the_preflight_saying_how_to_proceed():
    server = caddy_or_skip()
    try:
        config = engine_config({"h3_new": server.tls_url()}, verify_tls=True)
        messages, code, _ = run_engine(config)
    finally:
        server.stop()
    (error,) = [m["error"] for m in messages if m["type"] == "arm_error"]
    assert code == 3 and "TLS certificate verification failed" in error and "untick Verify TLS" in error
    assert "certificate" in error and not [m for m in messages if m["type"] == "arm"]


def test_udp_goes_to_the_pinned_address_and_no_name_is_looked_up(tmp_path):
    """The h3 arm under the DNS guard (``tests/workers/test_pinning.py``: every lookup logged and
    refused), its host a name pinned to the checked address (``localhost``: a name Caddy's certificate
    holds); the QUIC datagrams (and the Alt-Svc request) go there, the name stays for ``:authority``
    and SNI."""
    from portal.lib.runs.protocol import pin_key
    from tests.workers.test_pinning import run_guarded

    server = caddy_or_skip()
    try:
        url = f"https://localhost:{server.tls_port}/1k?arm=h3_new"
        config = engine_config({"h3_new": url}, pinned={pin_key(url): "127.0.0.1"}, users=1)
        messages, code, stderr, asked = run_guarded(config, tmp_path / "dns.log")
        seen = logged(server, "h3_new", 1)
    finally:
        server.stop()
    assert code == 0, [m for m in messages if m["type"] in ("refused", "arm_error")]
    assert asked == []  # the engine never looked a name up, for TCP or UDP
    (result,) = [m["result"] for m in messages if m["type"] == "arm"]
    assert result["requests"] > 0 and result["failures"] == 0 and result["address"] == "127.0.0.1"
    over_h3 = [e for e in seen if e["request"]["proto"] == "HTTP/3.0"]
    assert len(over_h3) >= result["requests"]
    assert {e["request"]["host"] for e in over_h3} == {f"localhost:{server.tls_port}"}
    assert {e["request"]["tls"]["server_name"] for e in over_h3} == {"localhost"}


def test_0rtt_refused_by_the_server_is_counted_as_refused_never_as_0rtt():
    """Each new connection goes to the other of two Caddys (a relay alternating per flow): the ticket a
    user offers was issued by the other server, which cannot open it, so it refuses the early data and
    makes a full handshake; the library sends the request again after it. Every such connection is
    counted in ``early_data.refused``, never as 0-RTT nor as resumed, as both servers' logs agree. (A
    ticket that arrives after its connection's answer is not kept, so the next connection may offer an
    older one, from the server it reaches: that one is accepted, and counted so.)"""
    first, second = caddy_or_skip(), caddy_or_skip()
    try:
        with UdpRelay(("127.0.0.1", first.tls_port), alternate=("127.0.0.1", second.tls_port)) as relay:
            url = f"https://127.0.0.1:{relay.port}/1k?arm=h3_0rtt"
            results, _ = run({"h3_0rtt": url}, users=1)
            flows = dict(relay.flows_to)
        result = results["h3_0rtt"]
        seen = logged(first, "h3_0rtt", 1) + logged(second, "h3_0rtt", 1)
    finally:
        first.stop()
        second.stop()
    assert_measured(result)
    quic, early = result["quic"], result["quic"]["early_data"]
    assert min(flows.values()) > 1  # both servers took connections
    assert early["refused"] > early["accepted"] and early["no_ticket"] == 0
    assert sum(early.values()) == quic["connections"] == result["connections_opened"]
    # Only an accepted one resumed: a refused one made a full handshake, and is no 0-RTT request.
    assert result["tls_sessions_reused"] == quic["resumed"] == early["accepted"]
    resumed_seen = sum(bool(e["request"]["tls"]["resumed"]) for e in seen)
    marked = sum(bool(e.get("resp_headers", {}).get(EARLY_DATA_HEADER)) for e in seen)
    unmeasured = result["warmup_requests"] + result["unwindowed_requests"] + 2  # + the preflight's
    assert len(seen) >= result["requests"] and resumed_seen <= early["accepted"] + unmeasured
    assert marked <= early["accepted"] + unmeasured


def test_a_cancel_during_the_quic_discovery_ends_the_engine_at_once():
    """SIGTERM while the preflight waits for a QUIC answer that never comes (3 s): the wait is cut."""
    from tests.workers.engine_lines import Engine

    with UdpRelay(("127.0.0.1", 9), drop_every=1) as relay:
        engine = Engine(engine_config({"h3_new": f"https://127.0.0.1:{relay.port}/1k"}))
        try:
            engine.until(lambda m: m["type"] == "hello")
            deadline = time.monotonic() + 5
            while relay.datagrams_from_client == 0 and time.monotonic() < deadline:
                time.sleep(0.02)  # the first QUIC datagram left: the preflight waits for an answer
            sent_at = engine.terminate()
            rest, code, ended_at = engine.rest(timeout_s=10)
        finally:
            engine.kill()
    assert relay.datagrams_from_client > 0
    assert code == 0 and ended_at - sent_at < 2.5  # the handshake timeout (3 s) would run out first
    assert [m["status"] for m in rest if m["type"] == "done"] == ["cancelled"]
    assert not [m for m in rest if m["type"] in ("arm", "refused")]


def test_a_quic_server_without_h3_refuses_the_arm_saying_so(tls_cert):
    """qh3's own server offering another protocol over ALPN (``tests/quic_server.py``): QUIC answers,
    h3 is not offered, and the arm is refused in those words within seconds."""
    from tests.quic_server import QuicServer

    with QuicServer(tls_cert, alpn=("hq-interop",)) as server:
        t0 = time.monotonic()
        messages, code, _ = run_engine(engine_config({"h3": f"https://127.0.0.1:{server.port}/1k"}))
        took_s = time.monotonic() - t0
        served = list(server.served)
    (refused,) = [m for m in messages if m["type"] == "refused"]
    assert refused["arm"] == "h3" and code == 3  # its only arm: the run fails with the reason
    assert refused["reason"].startswith(
        f"h3 refused: the server does not offer h3 over ALPN on UDP port {server.port}"
    )
    assert took_s < 10 and served == []
