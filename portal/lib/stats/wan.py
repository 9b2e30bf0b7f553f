"""WAN projection: what a user one round-trip time (RTT) away would wait, from what was measured here.

The generator usually sits next to the server, so the measured time holds the CPU work (TCP setup,
handshake crypto, the server's answer) but almost no network delay. Far away, every round trip of
the protocol costs an RTT on top. The model, per arm and RTT::

    projected TTLB = measured TTLB p50 (merged histogram of the arm) + round trips × RTT

Round trips per request, counted as a user waits for them:

* the request itself: 1 (request out, response back);
* TCP connect: 1, on arms that open a connection per request (``*_new``, ``tls_resumed``);
* TLS full handshake: 1 for TLS 1.3, 2 for TLS 1.2; resumed: 1 for TLS 1.3 and for TLS 1.2.
  TLS 1.3 early data (0-RTT) would make a resumed handshake 0: the generator's Python ``ssl``
  never sends early data, so the model charges 1 and says so (``early_data: false``);
* resumption is charged by its measured share: an arm that resumed r of its n handshakes pays
  r/n × resumed + (1 − r/n) × full round trips (fractional);
* the initial congestion window: a server sends at most ``INITCWND_SEGMENTS`` × MSS (10 × 1460 =
  14,600 bytes by default) before the client acknowledges; a handshake flight larger than that (the
  certificate chain, measured ``chain_bytes``, plus the rest of the flight) waits one more RTT per
  slow-start doubling. The flight is the one a variant's probe measured from the handshake
  (``server_flight_bytes``) when there is one, else ``chain_bytes`` + ``HANDSHAKE_OVERHEAD_BYTES``
  (an assumption: ServerHello, key share, signature, Finished and record headers);
* the client's first flight (its ClientHello, measured per variant as ``client_flight_bytes``) counts
  against the client's initial window the same way (``client_window``). The key share is what makes
  it grow: X25519MLKEM768 adds 1,184 bytes to the ClientHello and 1,088 to the server's flight
  (measured, so a server flight that the hybrid's ciphertext pushes past the initial window pays its
  round trip in ``window``). A ClientHello rarely reaches 10 segments; the model does not count what
  it does not know: middleboxes that mishandle a ClientHello over one segment, a HelloRetryRequest
  (the matrix offers one group, which the probe saw accepted in one round trip), or a smaller initial
  window on the client;
* a response larger than the initial window on a new connection likewise (slow start again, from
  the initial window: a conservative count); keep-alive connections are assumed to have opened
  their window.

Keep-alive arms (``plain``, ``tls``) are projected per request on an open connection: 1 round trip.
Their connection's own setup (TCP + TLS full handshake + window) is paid once by the first request
and amortised over all requests of the connection, tending to 0; ``first_request_extra_round_trips``
in the model says how much the first one pays. The ``*_new`` arms pay everything on every request.

HTTP/3 (QUIC over UDP, ``h3``, ``h3_new``, ``h3_resumed``, ``h3_0rtt`` and the matrix's ``h3_new@…``)
has no TCP connect: QUIC's handshake carries TLS 1.3 and the transport together (``quic_model``):

* ``h3_new``: 1 round trip of handshake before the request (TCP + TLS 1.3 pay 2);
* ``h3_resumed``: 1 (the resumed handshake still takes its round trip; the request follows it);
* ``h3_0rtt``: 0 extra for each connection whose early data the server accepted, 1 for one refused or
  without a ticket (weighted by the measured shares, ``early_data``);
* ``h3`` (warm): 0 extra, the request only; its first request pays the handshake (1) once;
* the anti-amplification limit (RFC 9000 §8.1): before the client's address is validated the server
  sends at most ``QUIC_AMPLIFICATION`` × what it received, the client's padded first flight
  (``first_flight_bytes_max``, measured). A full handshake whose server flight (measured: the window's
  ``handshake_bytes_received`` per connection) is larger waits one more round trip, each round trip
  allowing ``QUIC_AMPLIFICATION`` × more; resumed handshakes send no certificate and are not charged;
* a response larger than QUIC's initial congestion window (RFC 9002 §7.2: 10 × 1,200-byte datagrams)
  on a new connection waits one more RTT per slow-start doubling, as over TCP.

Assumptions stated next to the numbers (``model_inputs``): no packet loss, the server's think time
does not change with distance, bandwidth is not the limit (only the window), and the RTT is the same
in both directions' sum as given.

Checked against real delay (``docs/report-schema.md``): through a delaying relay on loopback
(``tests/workers/test_wan_relay.py``, any machine) and under ``tc netem`` where the kernel has it
(``tests/workers/test_wan_netem.py``): each arm's measured TTLB p50 within 10% of the projection;
the HTTP/3 arms likewise through a delaying UDP relay against Caddy
(``tests/workers/test_wan_relay_quic.py``: ``h3_new``'s 1 + 1, ``h3_0rtt``'s 0 + 1).
"""

from __future__ import annotations

import math

from portal.lib.tls.matrix import base_arm

DEFAULT_RTTS_MS = (2.0, 20.0, 80.0, 200.0)
MAX_RTTS = 8
MAX_RTT_MS = 2000.0
MSS_BYTES = 1460
INITCWND_SEGMENTS = 10
HANDSHAKE_OVERHEAD_BYTES = 1000
# HTTP/2 (h2, h2_new, h2c) counts as its HTTP/1.1 twin: the client sends its preface, SETTINGS and the
# request in one flight without waiting for the server's SETTINGS, so HTTP/2 adds no round trip; and
# one request per user is projected, so multiplexing saves none (it saves head-of-line round trips
# only when several requests are in flight, h2_streams > 1, which this model does not project). The
# TLS matrix's HTTP/2 sub-arms likewise: ``h2_new@1.2+rsa`` as ``tls_new@1.2+rsa`` (the TLS round trips
# of the protocol its probe negotiated, its own flights), ``h2@1.3`` as ``tls@1.3`` (by ``base_arm``).
NEW_CONNECTION_ARMS = ("plain_new", "tls_new", "tls_resumed", "tls_mtls", "h2_new")
TLS_ARMS = ("tls", "tls_new", "tls_resumed", "tls_mtls", "h2", "h2_new")
FULL_ROUND_TRIPS = {"TLSv1.3": 1, "TLSv1.2": 2, "TLSv1.1": 2, "TLSv1": 2}
RESUMED_ROUND_TRIPS = 1
# HTTP/3 (QUIC): handshake round trips before the request (TCP + TLS 1.3 pay 1 + 1), RFC 9000/9001/9002.
HTTP3_ARMS = ("h3", "h3_new", "h3_resumed", "h3_0rtt")
QUIC_FULL_ROUND_TRIPS = 1
QUIC_RESUMED_ROUND_TRIPS = 1
QUIC_EARLY_DATA_ROUND_TRIPS = 0
QUIC_AMPLIFICATION = 3
QUIC_DATAGRAM_BYTES = 1200
QUIC_INITIAL_WINDOW_DATAGRAMS = 10
FORMULA = "projected TTLB = measured TTLB p50 + round trips × RTT"


def parse_rtts(text: str | list | None) -> list[float]:
    """``"2,20,80,200"`` (or a list) → RTTs in ms; ValueError on a bad one. Empty: the defaults."""
    if text is None or text == "" or text == []:
        return list(DEFAULT_RTTS_MS)
    # A stored list comes back through a text field as "[2.0, 20.0]".
    items = text.strip().strip("[]").split(",") if isinstance(text, str) else list(text)
    rtts = []
    for item in items:
        if isinstance(item, str) and not item.strip():
            continue
        try:
            value = float(item)
        except (TypeError, ValueError):
            raise ValueError(f"an RTT is a number of milliseconds, not {item!r}") from None
        if not 0 <= value <= MAX_RTT_MS or math.isnan(value):
            raise ValueError(f"an RTT must be within 0–{MAX_RTT_MS:.0f} ms, not {value:g}")
        rtts.append(value)
    if len(rtts) > MAX_RTTS:
        raise ValueError(f"at most {MAX_RTTS} RTTs")
    if not rtts and isinstance(text, str) and text.strip().strip("[]").strip():
        raise ValueError(f"no RTT in {text!r}: give milliseconds, comma-separated, such as 2,20,80,200")
    return sorted(set(rtts)) or list(DEFAULT_RTTS_MS)


def slow_start_extra_round_trips(
    flight_bytes: int | None, mss: int = MSS_BYTES, initcwnd: int = INITCWND_SEGMENTS
) -> int:
    """Extra RTTs to send ``flight_bytes`` in slow start from ``initcwnd`` segments (0 when it fits)."""
    if not flight_bytes or flight_bytes <= 0:
        return 0
    segments = math.ceil(flight_bytes / mss)
    window, sent, extra = initcwnd, initcwnd, 0
    while sent < segments:
        window *= 2
        sent += window
        extra += 1
    return extra


def handshake_round_trips(protocol: str | None, resumed_share: float) -> float:
    """TLS round trips of one handshake: full by protocol, resumed 1, weighted by the resumed share."""
    full = FULL_ROUND_TRIPS.get(protocol or "", FULL_ROUND_TRIPS["TLSv1.3"])
    return round(resumed_share * RESUMED_ROUND_TRIPS + (1.0 - resumed_share) * full, 3)


def _flight(tls: dict, negotiated: dict | None) -> tuple[int | None, str]:
    """The server's handshake flight in bytes and where the number comes from."""
    measured = (negotiated or {}).get("server_flight_bytes")
    if measured:
        return int(measured), "measured from the variant's handshake"
    chain = (negotiated or {}).get("chain_bytes") or tls.get("chain_bytes")
    if chain:
        return int(
            chain
        ) + HANDSHAKE_OVERHEAD_BYTES, f"chain_bytes {chain} + assumed {HANDSHAKE_OVERHEAD_BYTES}"
    return None, "unknown (no chain_bytes measured): no window round trips counted"


def amplification_round_trips(server_flight: float | None, client_flight: int | None) -> int:
    """Extra RTTs a server's handshake flight waits under QUIC's anti-amplification limit: it may send
    ``QUIC_AMPLIFICATION`` × what the client sent, and each client flight it answers allows that much
    more (0 when it fits, or when either size is unknown)."""
    if not server_flight or not client_flight:
        return 0
    allowed, extra = QUIC_AMPLIFICATION * client_flight, 0
    while server_flight > allowed and extra < 10:
        extra += 1
        allowed += QUIC_AMPLIFICATION * client_flight
    return extra


def _early_share(quic: dict) -> float:
    early = quic.get("early_data") or {}
    total = sum(early.get(key) or 0 for key in ("accepted", "refused", "no_ticket"))
    return (early.get("accepted") or 0) / total if total else 0.0


def quic_model(name: str, section: dict) -> dict:
    """The round trips of one HTTP/3 arm's request (module docstring) and the inputs behind them."""
    base, quic = base_arm(name), section.get("quic") or {}
    ttlb = section["ttlb_us"]
    new_conn = base != "h3"
    handshakes = quic.get("connections") or section.get("connections_opened") or 0
    reused = quic.get("resumed") if quic.get("connections") else section.get("tls_sessions_reused")
    resumed_share = min(1.0, (reused or 0) / handshakes) if handshakes else 0.0
    early_share = _early_share(quic) if base == "h3_0rtt" else 0.0
    if base == "h3_0rtt":
        handshake = (1.0 - early_share) * QUIC_RESUMED_ROUND_TRIPS + early_share * QUIC_EARLY_DATA_ROUND_TRIPS
    elif new_conn:
        handshake = resumed_share * QUIC_RESUMED_ROUND_TRIPS + (1.0 - resumed_share) * QUIC_FULL_ROUND_TRIPS
    else:
        handshake = 0.0
    client_flight = quic.get("first_flight_bytes_max") or None
    completed = quic.get("connections") or 0  # the window's handshakes, whose bytes were counted
    server_flight = (quic.get("handshake_bytes_received") or 0) / completed if completed else None
    full_extra = amplification_round_trips(server_flight, client_flight)
    window_extra = round((1.0 - resumed_share) * full_extra, 3) if new_conn else 0
    body_bytes = (section.get("response_bytes") or {}).get("max")
    body_extra = (
        slow_start_extra_round_trips(body_bytes, QUIC_DATAGRAM_BYTES, QUIC_INITIAL_WINDOW_DATAGRAMS)
        if new_conn
        else 0
    )
    return {
        "measured_ttlb_p50_ms": round(ttlb["p50"] / 1000.0, 3),
        "measured_ttlb_count": ttlb.get("count"),
        "request": 1,
        "tcp": 0,
        "tls": 0,
        "quic": round(handshake, 3),
        "protocol": "QUIC (TLS 1.3)",
        "protocol_source": "measured" if quic else "unknown (no QUIC facts): QUIC round trips assumed",
        "resumed_share": round(resumed_share, 3) if new_conn else None,
        "early_data": round(early_share, 3) if base == "h3_0rtt" else False,
        "window": window_extra,
        "client_window": 0,
        "client_flight_bytes": client_flight,
        "handshake_flight_bytes": None if server_flight is None else round(server_flight),
        "handshake_flight_source": "measured: the window's handshake bytes received per connection"
        if server_flight
        else None,
        "amplification_limit_bytes": QUIC_AMPLIFICATION * client_flight if client_flight else None,
        "response_window": body_extra,
        "response_bytes": body_bytes,
        "round_trips": round(1 + handshake + window_extra + body_extra, 3),
        "connection": "new QUIC connection per request"
        if new_conn
        else "keep-alive (setup amortised, not charged)",
        "first_request_extra_round_trips": None if new_conn else QUIC_FULL_ROUND_TRIPS + full_extra,
    }


def arm_model(name: str, section: dict, tls_info: dict | None, negotiated: dict | None = None) -> dict | None:
    """The round trips of one arm's request and the inputs behind them; None without a TTLB."""
    ttlb = section.get("ttlb_us")
    if not ttlb or not ttlb.get("count"):
        return None
    base = base_arm(name)
    if base in HTTP3_ARMS:
        return quic_model(name, section)
    tls_info = tls_info or {}
    protocol = (negotiated or {}).get("protocol") or tls_info.get("protocol")
    new_conn = base in NEW_CONNECTION_ARMS
    is_tls = base in TLS_ARMS
    handshakes = section.get("connections_opened") or 0
    resumed_share = min(1.0, (section.get("tls_sessions_reused") or 0) / handshakes) if handshakes else 0.0
    flight, flight_source = _flight(tls_info, negotiated) if is_tls else (None, None)
    full_extra = slow_start_extra_round_trips(flight)
    client_flight = (negotiated or {}).get("client_flight_bytes") if is_tls and new_conn else None
    # Resumed handshakes in TLS 1.3 send their key share too: the client's flight is charged to all.
    client_extra = slow_start_extra_round_trips(client_flight)
    # A resumed handshake sends no certificate: only full handshakes pay the window.
    window_extra = round((1.0 - resumed_share) * full_extra, 3) if new_conn else 0
    tls_rt = handshake_round_trips(protocol, resumed_share) if is_tls and new_conn else 0
    body_bytes = (section.get("response_bytes") or {}).get("max")
    body_extra = slow_start_extra_round_trips(body_bytes) if new_conn else 0
    tcp = 1 if new_conn else 0
    total = round(1 + tcp + tls_rt + client_extra + window_extra + body_extra, 3)
    setup = 1 + (handshake_round_trips(protocol, 0.0) + full_extra if is_tls else 0)
    return {
        "measured_ttlb_p50_ms": round(ttlb["p50"] / 1000.0, 3),
        "measured_ttlb_count": ttlb.get("count"),
        "request": 1,
        "tcp": tcp,
        "tls": tls_rt,
        "protocol": protocol if is_tls else None,
        # Without the TLS facts (their probe failed) the protocol is not known: say what was assumed.
        "protocol_source": (
            None
            if not is_tls
            else "measured"
            if protocol
            else "unknown (no TLS facts): TLS 1.3 round trips assumed"
        ),
        "resumed_share": round(resumed_share, 3) if is_tls and new_conn else None,
        "early_data": False if is_tls else None,
        "window": window_extra,
        "client_window": client_extra,
        "client_flight_bytes": client_flight,
        "handshake_flight_bytes": flight,
        "handshake_flight_source": flight_source,
        "response_window": body_extra,
        "response_bytes": body_bytes,
        "round_trips": total,
        "connection": "new per request" if new_conn else "keep-alive (setup amortised, not charged)",
        "first_request_extra_round_trips": None if new_conn else setup,
    }


def project(
    arms: dict[str, dict],
    tls_info: dict | None,
    rtts_ms: list[float] | None = None,
    variants: dict[str, dict] | None = None,
) -> list[dict]:
    """The report's ``wan``: ``[{"rtt_ms", "arm", "variant", "projected_ttlb_ms", "round_trips",
    "model"}]``, arm by arm in report order, each at every RTT. ``variants``: sub-arm name → the matrix probe
    (its ``variant`` and the ``negotiated`` parameters); null ``variant`` outside the matrix."""
    variants = variants or {}
    models = {}
    for name, section in arms.items():
        probe = variants.get(name) or {}
        model = arm_model(name, section, tls_info, probe.get("negotiated"))
        if model is not None:
            models[name] = (model, probe.get("variant"))
    rows = []
    for name, (model, variant) in models.items():
        for rtt in rtts_ms if rtts_ms is not None else DEFAULT_RTTS_MS:
            rows.append(
                {
                    "rtt_ms": rtt,
                    "arm": name,
                    "variant": variant,
                    "projected_ttlb_ms": round(model["measured_ttlb_p50_ms"] + model["round_trips"] * rtt, 3),
                    "round_trips": model["round_trips"],
                    "model": model,
                }
            )
    return rows


def model_inputs(rtts_ms: list[float], tls_info: dict | None) -> dict:
    """What the page shows next to the WAN table: the formula, its constants and its assumptions."""
    tls_info = tls_info or {}
    return {
        "formula": FORMULA,
        "rtts_ms": list(rtts_ms),
        "mss_bytes": MSS_BYTES,
        "initcwnd_segments": INITCWND_SEGMENTS,
        "initcwnd_bytes": MSS_BYTES * INITCWND_SEGMENTS,
        "chain_bytes": tls_info.get("chain_bytes"),
        "protocol": tls_info.get("protocol"),
        "handshake_overhead_bytes": HANDSHAKE_OVERHEAD_BYTES,
        "round_trips": {
            "request": 1,
            "tcp": 1,
            "tls1.3_full": FULL_ROUND_TRIPS["TLSv1.3"],
            "tls1.2_full": FULL_ROUND_TRIPS["TLSv1.2"],
            "resumed": RESUMED_ROUND_TRIPS,
            "resumed_tls1.3_with_early_data": 0,
            "quic_full": QUIC_FULL_ROUND_TRIPS,
            "quic_resumed": QUIC_RESUMED_ROUND_TRIPS,
            "quic_0rtt_accepted": QUIC_EARLY_DATA_ROUND_TRIPS,
        },
        "assumptions": [
            "The measured time (p50 TTLB from this run's histograms) holds the CPU work; the network "
            "adds round trips × RTT on top.",
            "Keep-alive arms (plain, tls): per request on an open connection; the connection setup is "
            "paid by its first request (first_request_extra_round_trips) and amortised over the rest.",
            "New-connection arms pay TCP 1 + TLS (1.3 full 1, 1.2 full 2, resumed 1) + 1 for the request, "
            "resumption weighted by the share of handshakes that resumed.",
            "No early data: the generator's Python ssl never sends TLS 1.3 0-RTT; with it a resumed 1.3 "
            "handshake would cost 0 round trips.",
            f"Initial congestion window {INITCWND_SEGMENTS} × MSS {MSS_BYTES} bytes on both sides: a larger "
            "handshake flight (the server's, or the client's ClientHello with its key shares) or response "
            "on a new connection waits one more RTT per slow-start doubling.",
            "The key share's size is measured per variant (X25519MLKEM768: +1,184 bytes in the ClientHello, "
            "+1,088 in the server's flight), so a flight the hybrid pushes past the initial window pays "
            "its round trip; not counted: middleboxes that mishandle a ClientHello larger than one "
            "segment, and HelloRetryRequest (each variant offers one group, accepted in the probe).",
            "No packet loss; bandwidth is not the limit; the server's time does not change with distance.",
            "HTTP/3 (QUIC) has no TCP connect: a new QUIC connection (h3_new) pays 1 round trip before the "
            "request (TCP + TLS 1.3: 2), a resumed one (h3_resumed) 1, a 0-RTT one (h3_0rtt) 0 for each "
            "connection whose early data the server accepted and 1 for one it refused, a warm one (h3) "
            "none; a full handshake whose server flight exceeds 3 × the client's padded first flight "
            "(the anti-amplification limit, measured sizes) waits one more round trip per 3 × more; a "
            "response past QUIC's initial window (10 × 1,200 bytes) on a new connection waits one per "
            "slow-start doubling; no loss, so no probe timeouts.",
            "HTTP/2 arms (h2, h2_new, h2c) count as tls, tls_new and plain, and the TLS matrix's HTTP/2 "
            "sub-arms as their HTTP/1.1 twins (h2_new@1.2+rsa as tls_new@1.2+rsa, h2@1.3 as tls@1.3, with "
            "the protocol and flights their own probe measured): the preface and SETTINGS go out with the "
            "request (no extra round trip), and one request is projected at a time, so the head-of-line "
            "round trips multiplexing saves with several requests in flight are not projected.",
        ],
    }
