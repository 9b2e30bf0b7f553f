"""The WAN model's HTTP/3 round trips against real delay: the engine's HTTP/3 arms run against Caddy
(HTTP/3 on loopback) through a UDP relay that delays every datagram RTT/2 each way
(``tests/udp_relay.py``, ``delay_ms``), at 20 and 40 ms RTT, and each arm's measured TTLB p50 lands
within the TCP check's tolerance (10%, ``wan_check.TOLERANCE``) of the projection
``portal.lib.stats.wan`` makes from the same arms measured directly, without the relay, in the same
test — the same comparison as ``test_wan_relay.py`` (``wan_check.compare``/``assert_within``).

What this checks: ``h3_new`` 1 round trip of handshake + 1 for the request (where TCP + TLS 1.3 pay
3), ``h3_resumed`` 1 + 1, ``h3_0rtt`` 0 + 1 with the early data Caddy accepted (the model weighs the
measured accepted share; the test asserts it is the whole, or 0-RTT's saving would go unchecked)
and the warm ``h3`` 1 (its connection opened in the warm-up). Unlike the TCP relay, nothing is
emulated: QUIC runs over UDP end to end, so every datagram of its handshake pays the delay as on a
WAN, loss recovery and acknowledgements included (none are lost here). What it cannot check: the
anti-amplification round trip (Caddy's ECDSA certificate makes a server flight well within 3 × the
client's 1,200-byte Initial; the test asserts the model counts 0 for it, as the TCP relay test does
for the initial window) and the initial congestion window (the 1 KiB page fits).

Load: 1 user, closed loop; four arms in two interleaved rounds, directly 0.3 s per round, then
through the relay 0.6 s per round at each RTT (about 15 s in all): ``serial``, like the TCP one.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bench.caddy import Caddy
from portal.lib.stats import wan
from tests.udp_relay import UdpRelay
from tests.workers import wan_check

RTTS_MS = (20.0, 40.0)
ARMS = ("h3", "h3_new", "h3_resumed", "h3_0rtt")
BASE = {"duration_s": 0.3, "warmup_s": 0.1, "rounds": 2}
DELAYED = {"duration_s": 0.6, "warmup_s": 0.2, "rounds": 2}


def _echo_ms(port: int, payloads: list[bytes]) -> tuple[float, list[bytes]]:
    """Send ``payloads`` at once to ``port`` (UDP) and wait for as many answers: ms, answers in order."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        t0 = time.perf_counter()
        for payload in payloads:
            sock.sendto(payload, ("127.0.0.1", port))
        answers = [sock.recv(2048) for _ in payloads]
        return (time.perf_counter() - t0) * 1000, answers


@pytest.mark.serial
def test_the_udp_relay_delays_each_round_trip_by_twice_the_delay_in_order_without_serialising():
    rtt_ms = 40.0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as echo:
        echo.bind(("127.0.0.1", 0))
        echo.settimeout(0.05)
        with UdpRelay(echo.getsockname(), delay_ms=rtt_ms / 2) as relay:
            stop = threading.Event()

            def serve() -> None:
                while not stop.is_set():
                    try:
                        data, peer = echo.recvfrom(2048)
                    except TimeoutError:
                        continue
                    echo.sendto(data, peer)

            server = threading.Thread(target=serve, daemon=True)
            server.start()
            try:
                one_ms, _ = _echo_ms(relay.port, [b"hello"])
                burst = [bytes([i]) * 1000 for i in range(50)]
                burst_ms, answers = _echo_ms(relay.port, burst)  # one RTT for all, not 50 × RTT
            finally:
                stop.set()
                server.join(5)
        with UdpRelay(echo.getsockname()) as bare:  # without the option: no delay
            echo.settimeout(5)
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.settimeout(5)
                t0 = time.perf_counter()
                sock.sendto(b"x", ("127.0.0.1", bare.port))
                data, peer = echo.recvfrom(16)
                echo.sendto(data, peer)
                assert sock.recv(16) == b"x"
                bare_ms = (time.perf_counter() - t0) * 1000
    assert answers == burst  # in order, nothing lost
    assert relay.forwarded == {"to_server": 51, "to_client": 51} and relay.overflowed == 0
    early_ms, slack_ms = 1.0, rtt_ms / 2  # as the TCP relay's test: a busy machine wakes late
    assert rtt_ms - early_ms <= one_ms < rtt_ms + slack_ms, one_ms
    assert rtt_ms - early_ms <= burst_ms < rtt_ms + slack_ms, burst_ms
    assert bare_ms < 5, bare_ms
    with pytest.raises(ValueError, match="one-way delay"):
        UdpRelay(("127.0.0.1", 9), delay_ms=5000)


@pytest.mark.serial
def test_measured_h3_ttlb_through_a_delaying_udp_relay_lands_within_10_percent_of_the_projection():
    try:
        caddy = Caddy(key_types=("ec",)).start()
    except RuntimeError as exc:
        pytest.skip(f"QUIC relay WAN test: {exc}")
    delayed = {}
    try:
        url = caddy.tls_url()
        base = wan_check.measure(url, url, arms=ARMS, matrix=(), **BASE)
        for rtt_ms in RTTS_MS:
            with UdpRelay(("127.0.0.1", caddy.tls_port), delay_ms=rtt_ms / 2) as relay:
                relay_url = f"https://127.0.0.1:{relay.port}/1k"  # UDP to the relay (no TCP there)
                delayed[rtt_ms] = wan_check.measure(relay_url, relay_url, arms=ARMS, matrix=(), **DELAYED)
            # The engine's QUIC went through the relay: at least a flow per connection the arms opened.
            arms = delayed[rtt_ms]["arms"]
            opened = sum(arms[name]["quic"]["connections"] for name in ARMS)
            assert len(relay.flows_to) == 1 and relay.flows_to[("127.0.0.1", caddy.tls_port)] >= opened > 0
            assert relay.overflowed == 0 and relay.dropped == {"to_server": 0, "to_client": 0}
    finally:
        caddy.stop()
    rows = [row for rtt_ms in RTTS_MS for row in wan_check.compare(base, delayed[rtt_ms], rtt_ms)]
    expected = {"h3": 1, "h3_new": 2, "h3_resumed": 2, "h3_0rtt": 1}
    for row in rows:
        model = row["model"]
        print(wan_check.describe(row))
        # Under the amplification limit and within the initial window: the model counts no extra trip.
        assert model["window"] == 0 and model["response_window"] == 0, (row["arm"], model)
        assert model["handshake_flight_bytes"] is None or (
            model["handshake_flight_bytes"] < model["amplification_limit_bytes"]
        ), model
        assert row["round_trips"] == expected[row["arm"]], (row["arm"], model)
        if row["arm"] in ("h3_resumed", "h3_0rtt"):
            assert model["resumed_share"] > 0.9, (row["arm"], model)  # resumption really happened
        if row["arm"] == "h3_0rtt":
            assert model["early_data"] == 1.0, model  # Caddy accepted every 0-RTT request
    assert {row["arm"] for row in rows} == set(ARMS) and wan.QUIC_FULL_ROUND_TRIPS == 1
    wan_check.assert_within(rows)
