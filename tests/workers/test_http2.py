"""The HTTP/2 client against servers that end connections (GOAWAY) and limit streams, checked
against what the servers logged; and the http2 validity check judging what the engine recorded."""

from __future__ import annotations

import time

import jh2.connection as jh2_connection
import jh2.events as jh2_events
import pytest

from portal.lib.validity.http2 import check_http2
from tests.engine_config import engine_config
from tests.h2_servers import GoAwayServer
from tests.workers.engine_lines import Engine
from workers.engine.http.by_protocol import new_client
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
from workers.engine.recording.recorder import ArmRecorder
from workers.engine.tls.libraries import make_context

# The tests that run the engine as a subprocess (``Engine``): on libnghttp2 only (``h2_library``).
ENGINE_SUBPROCESS = {
    "test_h2_streams_4_keeps_four_requests_in_flight_on_a_server_allowing_128",
    "test_a_server_allowing_fewer_streams_than_asked_is_reported_from_its_settings",
    "test_h2c_against_a_port_without_http2_is_refused_with_the_reason_never_measured_as_http11",
}


@pytest.fixture(autouse=True, params=["libnghttp2", "jh2"])
def h2_library(request, monkeypatch):
    """The in-process tests here on both protocol libraries: libnghttp2 (the engine's where it is
    installed, as in CI) and jh2 (its fallback, ``nghttp2.ENABLED = False``). An engine subprocess
    takes no setting from its environment, so the tests running one run once, on libnghttp2."""
    from workers.engine.http import nghttp2

    if request.param == "jh2":
        if request.node.originalname in ENGINE_SUBPROCESS:
            pytest.skip("an engine subprocess runs on libnghttp2 (the in-process tests cover jh2)")
        monkeypatch.setattr(nghttp2, "ENABLED", False)
    return request.param


def test_the_client_speaks_through_the_chosen_library(tmp_path, h2_library):
    from workers.engine.http import nghttp2

    with GoAwayServer(tmp_path, goaway_after=100) as server:
        context = make_context("system", False, alpn=("h2",))
        client = new_client(Endpoint.resolve(server.url()), ARM_POLICIES["h2"][1], context)
        sample = client.request("/1k", "/1k")
        library = type(client.conn.h2)
        client.close()
    assert sample.error is None and sample.status == 200 and sample.body_bytes == 1024
    expected = nghttp2.NgConnection if h2_library == "libnghttp2" else jh2_connection.H2Connection
    assert library is expected
    assert nghttp2.describe().startswith(h2_library + " ")


def test_a_server_breaking_the_protocol_fails_the_request_with_the_libraries_reason(tmp_path):
    """A DATA frame on stream 0 is a connection error (RFC 9113 §6.1): the request fails as a
    protocol_error naming the library's reason, and the next request opens a new connection."""
    import socket
    import ssl
    import threading

    from portal.lib.tls.certs import make_self_signed

    cert, key = make_self_signed(tmp_path, name="broken")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    accepted = []

    def serve() -> None:
        for _ in range(2):
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            raw.settimeout(5)
            with context.wrap_socket(raw, server_side=True) as sock:
                accepted.append(sock.selected_alpn_protocol())
                sock.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS, empty
                got = b""
                while b"\x01" not in got[24:]:  # the preface, then frames up to the request's HEADERS
                    got += sock.recv(65536)
                sock.sendall(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x")  # DATA on stream 0
                try:
                    while sock.recv(65536):
                        pass
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    endpoint = Endpoint.resolve(f"https://127.0.0.1:{listener.getsockname()[1]}/")
    client = new_client(endpoint, ARM_POLICIES["h2"][1], make_context("system", False, alpn=("h2",)))
    samples = [client.request("/", "/") for _ in range(2)]
    client.close()
    thread.join(timeout=10)
    listener.close()
    assert [s.error for s in samples] == ["protocol_error"] * 2, [s.error_detail for s in samples]
    assert all("protocol error" in s.error_detail.lower() for s in samples), [s.error_detail for s in samples]
    assert accepted == ["h2", "h2"]  # the failed connection was not used again


def test_goaway_after_three_streams_reopens_and_every_request_is_answered_once(tmp_path):
    with GoAwayServer(tmp_path, goaway_after=3) as server:
        endpoint = Endpoint.resolve(server.url())
        client = new_client(endpoint, ARM_POLICIES["h2"][1], make_context("system", False, alpn=("h2",)))
        recorder = ArmRecorder("h2")
        recorder.start_window()
        samples = [client.request("/1k", "/1k") for _ in range(10)]
        for sample in samples:
            recorder.record(sample, sample.status == 200)
        client.close()
        recorder.close_window()
    assert [s.error for s in samples] == [None] * 10 and {s.body_bytes for s in samples} == {1024}
    # The server's account: four connections, all ALPN h2, 3 + 3 + 3 + 1 streams answered.
    assert [entry["alpn"] for entry in server.log] == ["h2"] * 4
    assert [entry["streams"] for entry in server.log] == [3, 3, 3, 1]
    result = recorder.result()
    assert result["connections_opened"] == 4 and result["connections_reopened"] == 3
    assert result["http2"]["alpn"] == {"h2": 4} and result["http2"]["goaway"] == {"NO_ERROR": 3}
    arm = {"requests": 10, "errors": result["errors"], "http2": result["http2"]}
    check = check_http2({"h2_streams": 1}, {"h2": arm})
    assert check["status"] == "warn" and "GOAWAY during the window (NO_ERROR ×3)" in check["detail"]


def test_the_libraries_building_of_the_request_frames_is_not_timed(tmp_path):
    """The timer runs from the request's start to its last byte, less the ``jh2`` library's building of
    the request's frames: made slow here (0.2 s per HEADERS built), it shows in the request's whole
    duration but not in its TTLB, on a kept connection and on a new one (whose connect and handshake
    stay in, as on HTTP/1.1)."""
    slow_s = 0.2
    with GoAwayServer(tmp_path, goaway_after=100) as server:
        endpoint = Endpoint.resolve(server.url())
        client = new_client(endpoint, ARM_POLICIES["h2"][1], make_context("system", False, alpn=("h2",)))
        first = client.request("/1k", "/1k")
        send_headers = client.conn.h2.send_headers

        def slow_send_headers(*args, **kwargs):
            time.sleep(slow_s)
            return send_headers(*args, **kwargs)

        client.conn.h2.send_headers = slow_send_headers
        kept = client.request("/1k", "/1k")
        client.close()
    assert first.error is None and kept.error is None and kept.connect_us is None
    whole_us = (kept.end_ns - kept.start_ns) // 1000
    assert whole_us >= slow_s * 1e6 and kept.ttlb_us <= whole_us - slow_s * 1e6
    assert first.ttlb_us >= first.connect_us + first.tls_handshake_us


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ([("Server", "upper-case")], "Received uppercase header name"),
        ([("connection", "keep-alive")], "Connection-specific header field present"),
        ([(":status", "204")], "Received duplicate pseudo-header field"),
    ],
)
def test_a_malformed_answer_fails_its_request_every_time_and_the_connection_goes_on(tmp_path, extra, said):
    """The connection's configuration leaves jh2's per-block header checks off; the client runs the
    library's check once per distinct block instead. A malformed block is never remembered as valid:
    every answer carrying it fails (protocol_error), on the one connection the server logged."""
    with GoAwayServer(tmp_path, goaway_after=100, extra=extra) as server:
        endpoint = Endpoint.resolve(server.url())
        client = new_client(endpoint, ARM_POLICIES["h2"][1], make_context("system", False, alpn=("h2",)))
        samples = [client.request("/1k", "/1k") for _ in range(3)]
        client.close()
    assert [s.error for s in samples] == ["protocol_error"] * 3
    assert all("malformed response headers" in s.error_detail and said in s.error_detail for s in samples)
    assert [(entry["alpn"], entry["streams"]) for entry in server.log] == [("h2", 3)]


def test_the_request_headers_are_normalised_and_checked_once_as_the_library_would(tmp_path):
    """A run's custom headers go out as jh2 sends them with its outbound checks on (done once per
    header list, not per request): names lower-cased, a connection-specific field dropped (the
    server, h2 with its checks on, would reject the stream otherwise); a ``te`` other than trailers
    fails each request before anything is sent."""
    context = make_context("system", False, alpn=("h2",))
    headers = {"X-Run": "7", "Connection": "close", "Authorization": "Bearer t"}
    with GoAwayServer(tmp_path, goaway_after=100) as server:
        endpoint = Endpoint.resolve(server.url())
        client = new_client(endpoint, ARM_POLICIES["h2"][1], context, headers=headers)
        samples = [client.request("/1k", "/1k") for _ in range(3)]
        client.close()
        bad = new_client(endpoint, ARM_POLICIES["h2"][1], context, headers={"TE": "gzip"})
        refused = [bad.request("/1k", "/1k") for _ in range(2)]
        bad.close()
    assert [(s.error, s.status) for s in samples] == [(None, 200)] * 3
    sent = dict(server.log[0]["request_headers"])
    assert sent[b"x-run"] == b"7" and sent[b"authorization"] == b"Bearer t" and b"connection" not in sent
    assert [s.error for s in refused] == ["protocol_error"] * 2
    assert all("not valid HTTP/2" in s.error_detail for s in refused)
    # The second client never connected: its requests failed before anything was sent.
    assert len(server.log) == 1


# nginx's start and end of each request on each connection: ``$msec`` is when it logged the answer
# (its end), ``$request_time`` how long since the request's first bytes were read.
OVERLAP_LOG = "$connection $connection_requests $msec $request_time $server_protocol $uri"
LOG_RESOLUTION_S = (
    0.005  # both have ms resolution: a lane's next request may seem to start before its last ended
)


def in_flight_by_connection(lines: list[list[str]], uri: str) -> dict[str, int]:
    """The most requests nginx served at once on each connection, from its log: each request's
    interval narrowed by the log's resolution at both ends, so that one lane's request and its next
    never count as overlapping."""
    events: dict[str, list[tuple[float, int]]] = {}
    for connection, _, msec, request_time, _protocol, logged_uri in lines:
        if logged_uri != uri:
            continue
        end = float(msec) - LOG_RESOLUTION_S
        start = float(msec) - float(request_time) + LOG_RESOLUTION_S
        events.setdefault(connection, []).extend([(start, 1), (end, -1)])
    peaks = {}
    for connection, points in events.items():
        current = peak = 0
        for _, step in sorted(points):  # at the same instant an end (-1) comes before a start
            current += step
            peak = max(peak, current)
        peaks[connection] = peak
    return peaks


def test_h2_streams_4_keeps_four_requests_in_flight_on_a_server_allowing_128():
    """``h2_streams`` 4 on a closed loop: the user's four lanes keep four requests in flight on its one
    connection, as nginx (128 streams allowed, its default) saw them. Each request of ``/slow`` is
    answered after 0.2 s (Debian's echo module), so its start and end in nginx's access log tell how
    many were in flight together on the connection — four at most and four at the peak; one stream at
    a time would show one."""
    from bench.nginx import Nginx

    with Nginx(http2=True, delayed={"/slow": 0.2}, access_log_format=OVERLAP_LOG) as nginx:
        config = engine_config({"h2": nginx.tls_url("/slow")}, h2_streams=4, warmup_s=0.5, duration_s=1.0)
        engine = Engine(config)
        arm = engine.until(lambda m: m["type"] == "arm")["result"]
        engine.proc.wait(timeout=30)
        lines = [line.split() for line in nginx.access_log_lines()]
    h2 = [line for line in lines if line[4] == "HTTP/2.0"]
    peaks = in_flight_by_connection(h2, "/slow")
    # The preflight's connection (one request) and the user's: four in flight, never five.
    user_connection = max(peaks, key=lambda c: sum(1 for line in h2 if line[0] == c))
    assert peaks[user_connection] == 4, peaks
    assert max(peaks.values()) == 4
    assert sum(1 for line in h2 if line[0] == user_connection) >= 4 * 4  # ≥ 4 rounds of 0.2 s
    # What the client recorded agrees: the server's limit, and four streams in flight at its peak.
    facts = arm["http2"]
    assert facts["peer_max_streams"] == 128 and facts["streams_peak"] == 4
    assert arm["failures"] == 0 and arm["requests"] >= 4 * 2


def test_the_overlap_count_reads_nginx_log_lines():
    """The evidence's own arithmetic on hand-made lines: two requests overlapping on connection 7, a
    third starting the millisecond the first ended (one lane's next request), one alone on 9."""
    lines = [
        ["7", "1", "100.200", "0.200", "HTTP/2.0", "/slow"],  # 100.000 … 100.200
        ["7", "2", "100.250", "0.200", "HTTP/2.0", "/slow"],  # 100.050 … 100.250
        ["7", "3", "100.400", "0.201", "HTTP/2.0", "/slow"],  # 100.199 … 100.400: after the first
        ["9", "1", "100.300", "0.300", "HTTP/2.0", "/slow"],
        ["7", "4", "100.300", "0.300", "HTTP/2.0", "/1k"],  # another path: not counted
    ]
    assert in_flight_by_connection(lines, "/slow") == {"7": 2, "9": 1}


@pytest.mark.parametrize("limit", [1])
def test_a_server_allowing_fewer_streams_than_asked_is_reported_from_its_settings(limit):
    from bench.nginx import Nginx

    log = "$server_protocol $ssl_alpn_protocol $connection $connection_requests"
    with Nginx(http2=True, http2_max_concurrent_streams=limit, access_log_format=log) as nginx:
        config = engine_config({"h2": nginx.tls_url("/1k")}, h2_streams=4, arrival_rate=60)
        engine = Engine(config)
        arm = engine.until(lambda m: m["type"] == "arm")["result"]
        engine.proc.wait(timeout=30)
        lines = [line.split() for line in nginx.access_log_lines()]
    facts = arm["http2"]
    # What nginx said in its SETTINGS, and what the client then kept to: one stream at a time.
    assert facts["peer_max_streams"] == limit and facts["streams_peak"] == limit
    assert arm["failures"] == 0 and "refused_stream" not in arm["errors"]
    # nginx's own log: every HTTP/2 request came with ALPN h2 (the HTTP/1.1 lines are nginx's start-up
    # check and the engine's TLS facts probe), the arm's all on the user's one connection.
    h2_lines = [line for line in lines if line[0] == "HTTP/2.0"]
    assert {line[1] for line in h2_lines} == {"h2"}
    # The preflight's connection and the user's (a third was seen under load, opened in the warm-up).
    assert 2 <= len({line[2] for line in h2_lines}) <= 3
    assert max(int(line[3]) for line in h2_lines) >= arm["requests"]
    seen = {"requests": arm["requests"], "errors": arm["errors"], "http2": facts}
    check = check_http2(config, {"h2": seen})
    assert check["status"] == "warn" and f"allows {limit} concurrent streams" in check["detail"]


def test_h2c_against_a_port_without_http2_is_refused_with_the_reason_never_measured_as_http11():
    """nginx's plain port without ``http2`` answers the HTTP/2 preface as a bad HTTP/1.1 request and
    closes: the h2c arm is refused with the reason, the plain arm beside it is measured."""
    from bench.nginx import Nginx

    with Nginx(access_log_format="$server_protocol $status $request") as nginx:
        config = engine_config(
            {"plain": nginx.plain_url("/1k"), "h2c": nginx.plain_url("/1k")}, duration_s=0.5, arrival_rate=60
        )
        engine = Engine(config)
        _, code, _ = engine.rest(timeout_s=60)
        served = nginx.access_log_lines()
    assert code == 0 and engine.messages[-1] == {"type": "done", "status": "succeeded"}
    (refused,) = [m for m in engine.messages if m["type"] == "refused"]
    assert refused["arm"] == "h2c"
    assert "does not speak HTTP/2 with prior knowledge on this port" in refused["reason"]
    assert [m["arm"] for m in engine.messages if m["type"] == "arm"] == ["plain"]
    # The server's account: one preface it could not read, then only the plain arm's HTTP/1.1 GETs.
    assert served.count("- 400 PRI * HTTP/2.0") == 1
    assert {line for line in served if "PRI" not in line} == {"HTTP/1.1 200 GET /1k HTTP/1.1"}


def test_h2c_against_nginx_answers_without_a_nagle_stall():
    """bench.nginx's h2c port serves without sendfile: with it, nginx 1.22 sends the DATA frame ~40 ms
    after the HEADERS frame (Nagle against the client's delayed ACK), and h2c would measure that."""
    import statistics

    from bench.nginx import Nginx

    with Nginx(http2=True) as nginx:
        url = nginx.h2c_url("/1k")
        client = new_client(Endpoint.resolve(url), ARM_POLICIES["h2c"][1], None)
        samples = [client.request(url, "/1k") for _ in range(7)]
        client.close()
    assert [(s.error, s.status, s.body_bytes, s.alpn) for s in samples[:1]] == [(None, 200, 1024, "h2c")]
    assert all(s.error is None and s.body_bytes == 1024 for s in samples)
    assert statistics.median(s.ttlb_us for s in samples[1:]) < 20_000


def test_an_answers_status_and_fields_are_read_for_every_request_from_one_reading_per_block(tmp_path):
    """The client reads an answer's header block (validity, status, the fields a report keeps) once
    per distinct block and looks it up after: every request still gets its answer's status and
    fields, and a block that differs (another server's) is read afresh."""
    context = make_context("system", False, alpn=("h2",))
    seen = []
    for name in ("first-server", "second-server"):
        with GoAwayServer(tmp_path / name, goaway_after=100, server=name) as server:
            client = new_client(Endpoint.resolve(server.url()), ARM_POLICIES["h2"][1], context)
            samples = [client.request("/1k", "/1k") for _ in range(3)]
            client.close()
        seen += [(s.error, s.status, s.server, s.content_type, s.body_bytes) for s in samples]
    assert (
        seen
        == [(None, 200, "first-server", "text/plain", 1024)] * 3
        + [(None, 200, "second-server", "text/plain", 1024)] * 3
    )


def test_answers_data_handed_back_in_batches_never_stalls_the_server():
    """The client hands an ended stream's DATA back to the library's window accounting in batches
    (``Connection.acknowledge``); over a connection window of 4 MiB with 1 MiB batches, a server (the
    ``h2`` package, its own flow control) sends 16 MB of answers without ever running out of window,
    and reads the client's WINDOW_UPDATEs for the connection."""
    import contextlib

    import h2.config
    import h2.connection
    import h2.events

    from workers.engine.http.http2_state import ACK_BATCH_BYTES, Connection

    client = Connection(sock=None, write_lock=contextlib.nullcontext())
    client.h2.initiate_connection()
    client.h2.increment_flow_control_window(4 * 2**20 - 65535)
    client.ack_batch_bytes = ACK_BATCH_BYTES
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    server.receive_data(client.h2.data_to_send())
    client.h2.receive_data(server.data_to_send())
    body = b"x" * 16000
    request = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"a"), (b":path", b"/")]
    window_updates = received = 0
    for _ in range(1000):
        stream_id = client.h2.get_next_available_stream_id()
        client.h2.send_headers(stream_id, request, end_stream=True)
        for event in server.receive_data(client.h2.data_to_send()):
            window_updates += isinstance(event, h2.events.WindowUpdated) and event.stream_id == 0
        server.send_headers(stream_id, [(":status", "200")])
        server.send_data(stream_id, body, end_stream=True)  # h2 raises FlowControlError past the window
        for event in client.h2.receive_data(server.data_to_send()):
            if isinstance(event, jh2_events.DataReceived):
                received += len(event.data)
                client.acknowledge(event)
    assert received == 1000 * len(body)
    assert window_updates >= 1


def _sans_io_pair():
    """The client's ``Connection`` (on the library ``h2_library`` chose) and an ``h2`` server, their
    prefaces exchanged, the client's request on stream 1 received by the server."""
    import contextlib

    import h2.config
    import h2.connection

    from workers.engine.http.http2_state import Connection

    client = Connection(sock=None, write_lock=contextlib.nullcontext())
    client.h2.initiate_connection()
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    server.initiate_connection()
    server.receive_data(client.h2.data_to_send())
    client.h2.receive_data(server.data_to_send())
    request = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"a"), (b":path", b"/")]
    client.h2.send_headers(client.h2.get_next_available_stream_id(), request, end_stream=True)
    server.receive_data(client.h2.data_to_send())
    return client, server


def test_a_reset_after_the_answer_ended_is_ignored():
    """An RST_STREAM read with the answer that ended its stream changes nothing (as jh2 does)."""
    client, server = _sans_io_pair()
    server.send_headers(1, [(":status", "200"), ("content-length", "3")])
    server.send_data(1, b"abc", end_stream=True)
    answer = server.data_to_send()
    reset = b"\x00\x00\x04\x03\x00\x00\x00\x00\x01\x00\x00\x00\x00"  # RST_STREAM(NO_ERROR) on stream 1
    kinds = [type(event).__name__ for event in client.h2.receive_data(answer + reset)]
    assert kinds == ["ResponseReceived", "DataReceived", "StreamEnded"]


@pytest.mark.parametrize(
    ("case", "said"),
    [("short body", "content-length"), ("1xx ending", "1xx"), ("trailers not ending", "trailers")],
)
def test_an_answer_breaking_a_message_rule_is_a_connection_error(case, said, h2_library):
    """What jh2 refuses beyond a header block's own rules, libnghttp2 (its messaging checks off) is
    made to refuse too: a body unlike its content-length, a 1xx answer that ends its stream, trailers
    that do not. Each raises the library's ProtocolError (the engine's protocol_error)."""
    import jh2.exceptions
    from jh2.hpack import Encoder

    client, server = _sans_io_pair()
    if case == "short body":
        server.send_headers(1, [(":status", "200"), ("content-length", "10")])
        server.send_data(1, b"abc", end_stream=True)
        data = server.data_to_send()
    elif case == "1xx ending":  # HEADERS with END_STREAM | END_HEADERS carrying ":status: 103"
        block = Encoder().encode([(b":status", b"103")])
        data = len(block).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + block
    else:
        server.send_headers(1, [(":status", "200")])
        server.send_data(1, b"abc")
        head = server.data_to_send()
        block = Encoder().encode([(b"x-trailer", b"1")])
        data = head + len(block).to_bytes(3, "big") + b"\x01\x04\x00\x00\x00\x01" + block  # no END_STREAM
    with pytest.raises(jh2.exceptions.ProtocolError) as raised:
        client.h2.receive_data(data)
    if h2_library == "libnghttp2":
        assert said in str(raised.value)


def test_a_request_the_library_will_not_send_fails_at_once(tmp_path, h2_library):
    """A request header block over libnghttp2's limit (a 70 KB path) is refused by it before it goes
    out: the request fails at once as protocol_error saying so, never waits for its timeout. jh2
    sends it, and this test server (``h2``) closes the connection on it: an answer at once too."""
    with GoAwayServer(tmp_path, goaway_after=100) as server:
        context = make_context("system", False, alpn=("h2",))
        client = new_client(Endpoint.resolve(server.url()), ARM_POLICIES["h2"][1], context, timeout_s=5.0)
        first = client.request("/1k", "/1k")
        path = "/" + "a" * 70_000
        started = time.perf_counter()
        sample = client.request(path, path)
        took_s = time.perf_counter() - started
        client.close()
    assert first.error is None and took_s < 2.0
    if h2_library == "libnghttp2":
        assert sample.error == "protocol_error" and "was not sent" in sample.error_detail, sample.error_detail
    else:
        assert sample.error == "connection_reset", sample.error_detail


def test_the_servers_stream_limit_is_read_only_when_its_settings_carry_one():
    """A SETTINGS frame without SETTINGS_MAX_CONCURRENT_STREAMS says nothing of a limit (the report
    then shows "no server limit", never libnghttp2's 2**32 - 1); one with it gives its value."""
    import contextlib

    import jh2.events
    from jh2.settings import SettingCodes

    from workers.engine.http.http2_state import Connection

    frames = {
        "none": b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
        "window only": b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x04\x00\x01\x86\xa0",
        "limit 50": b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x32",
    }
    seen = {}
    for name, frame in frames.items():
        client = Connection(sock=None, write_lock=contextlib.nullcontext())
        client.h2.initiate_connection()
        client.h2.data_to_send()
        (event,) = [
            e for e in client.h2.receive_data(frame) if isinstance(e, jh2.events.RemoteSettingsChanged)
        ]
        limit = event.changed_settings.get(SettingCodes.MAX_CONCURRENT_STREAMS)
        seen[name] = None if limit is None else limit.new_value
    assert seen == {"none": None, "window only": None, "limit 50": 50}
