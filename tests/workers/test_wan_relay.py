"""The WAN model against real delay on a machine without ``tc netem``: the engine's arms run through
a delaying relay on loopback (``tests/delay_relay.py``) at 20 and 40 ms RTT, and each arm's
measured TTLB p50 lands within 10% of the projection ``portal.lib.stats.wan`` makes from the same arms
measured directly, without the relay, in the same test (the model's own inputs: the loopback p50,
the TLS facts, each variant's handshake flight, each arm's resumed share).

What this checks and what it cannot:

* every byte between the engine and nginx is delayed RTT/2 each way, so the request's round trip
  and each TLS handshake flight cost what they would over a WAN: the counts for the request (1, on
  keep-alive ``tls`` and its ``tls@1.2``/``tls@1.3``), TLS 1.3 full (1: ``tls_new``,
  ``tls_new@1.3+full``), TLS 1.2 full (2: ``tls_new@1.2+full``) and resumed (1: ``tls_resumed``,
  ``tls_new@1.3+ticket``, ``tls_new@1.2+ticket``, ``tls_new@1.2+sessid``) are checked for real;
* the relay's kernel completes the client's TCP handshake at once (a userspace relay never sees SYN
  and SYN-ACK), so the relay emulates TCP's round trip by holding a connection's first bytes one
  RTT: the model's TCP 1 (``plain_new`` and every new-connection arm) is checked only by that
  construction;
* the relay terminates TCP, so the initial congestion window is not emulated: nginx's certificate is
  a small self-signed one (an RSA-2048 leaf, no chain), its handshake flight and the 1 KiB page fit
  in 10 × MSS, and the test asserts the model counts 0 window round trips for them — the window rule
  stays checked only under netem (``test_wan_netem.py``).

Load: 1 user, closed loop; eleven (sub-)arms in two interleaved rounds, directly 0.3 s per round,
then through the relay 0.6 s per round at each RTT (about 50 s in all): ``serial``. The relay's own cost
(its threads' wake-ups, ~0.2 ms per round trip on an idle machine, more on a busy one) makes the
measured times read a little above the projection.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bench.nginx import Nginx, find_binary
from portal.lib.stats import wan
from tests.delay_relay import DelayRelay
from tests.workers import wan_check

RTTS_MS = (20.0, 40.0)
# The keep-alive tls arm stands for plain too (the same 1 round trip per request); the matrix's
# protocol × resumption sub-arms add TLS 1.2's full and resumed handshakes.
ARMS = ("tls", "plain_new", "tls_new", "tls_resumed")
MATRIX = ("protocol", "resumption")
# Two interleaved rounds per arm, directly and through the relay, so a burst of load from elsewhere
# on the machine is shared by every arm rather than landing on one; through the relay the warm-up
# holds the keep-alive arms' connection setup (up to 4 round trips).
BASE = {"duration_s": 0.3, "warmup_s": 0.1, "rounds": 2}
DELAYED = {"duration_s": 0.6, "warmup_s": 0.2, "rounds": 2}


def _echo_server() -> socket.socket:
    """A loopback echo server in daemon threads; closing the returned listener ends its acceptor."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        # Without it Nagle would hold an echo until the relay's (delayed) ACK of the one before.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener


def _exchange_ms(port: int, payload: bytes) -> float:
    """Milliseconds from connect to the echo of ``payload`` on a new connection."""
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(payload)
        assert sock.recv(len(payload)) == payload
        return (time.perf_counter() - t0) * 1000


@pytest.mark.serial
def test_the_relay_delays_each_round_trip_by_the_rtt_in_order_without_serialising_a_burst():
    rtt_ms = 40.0
    listener = _echo_server()
    try:
        with DelayRelay(listener.getsockname()[1], rtt_ms) as relay:
            # TCP's round trip (emulated) + the request's: 2 RTTs on a new connection.
            first_ms = _exchange_ms(relay.port, b"hello")
            with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(b"open")
                assert sock.recv(16) == b"open"
                t0 = time.perf_counter()
                sent = b"".join(bytes([i]) * 1000 for i in range(50))
                for i in range(50):  # a burst of 50 chunks: one RTT for all, not 50 × RTT/2
                    sock.sendall(bytes([i]) * 1000)
                got = b""
                while len(got) < len(sent):
                    got += sock.recv(65536)
                burst_ms = (time.perf_counter() - t0) * 1000
        assert got == sent  # in order, nothing lost
        # Whole round trips: a hop may be early by the relay's median oversleep (1 ms at most), and
        # half an RTT of slack above for a busy machine (load, the GIL).
        early_ms, slack_ms = 2.0, rtt_ms / 2
        assert 2 * rtt_ms - early_ms <= first_ms < 2 * rtt_ms + slack_ms, first_ms
        assert rtt_ms - early_ms <= burst_ms < rtt_ms + slack_ms, burst_ms
        assert relay.connections == 2
        # Without the emulation a new connection would cost 1 RTT: the relay's kernel answers the SYN.
        with DelayRelay(listener.getsockname()[1], rtt_ms, emulate_tcp_handshake=False) as bare:
            bare_ms = _exchange_ms(bare.port, b"hello")
        assert rtt_ms - early_ms <= bare_ms < rtt_ms + slack_ms, bare_ms
    finally:
        listener.close()


@pytest.mark.serial
def test_measured_ttlb_through_a_delaying_relay_lands_within_10_percent_of_the_projection():
    if find_binary() is None:
        pytest.skip("relay WAN test: nginx not found")
    delayed = {}
    with Nginx() as nginx:
        base = wan_check.measure(nginx.plain_url(), nginx.tls_url(), arms=ARMS, matrix=MATRIX, **BASE)
        for rtt_ms in RTTS_MS:
            with DelayRelay(nginx.plain_port, rtt_ms) as plain, DelayRelay(nginx.tls_port, rtt_ms) as tls:
                delayed[rtt_ms] = wan_check.measure(
                    plain.url("http"), tls.url("https"), arms=ARMS, matrix=MATRIX, **DELAYED
                )
            # The engine went through the relays (its probes too: at least as many as the arms opened).
            arms = delayed[rtt_ms]["arms"]
            assert plain.connections >= arms["plain_new"]["connections_opened"] > 0
            opened = sum(arms[name]["connections_opened"] for name in arms if name.startswith("tls_"))
            assert tls.connections >= opened > 0
    # TLS 1.2's full (2 round trips) and resumed handshakes are checked too, through the sub-arms.
    assert {"tls_new@1.2+full", "tls_new@1.2+ticket", "tls_new@1.2+sessid"} <= set(base["variants"])
    rows = [row for rtt_ms in RTTS_MS for row in wan_check.compare(base, delayed[rtt_ms], rtt_ms)]
    for row in rows:
        model = row["model"]
        # The relay does not emulate the initial window: the model must count no window round trip here.
        assert model["window"] == 0 and model["response_window"] == 0, (row["arm"], model)
        if model["handshake_flight_bytes"] is not None:
            assert model["handshake_flight_bytes"] < wan.MSS_BYTES * wan.INITCWND_SEGMENTS
        print(wan_check.describe(row))
    wan_check.assert_within(rows)
