"""The engine preflights every arm before it measures the first (issue 22): a certificate that does
not verify, an answer outside the expected set or a closed port on any arm stops the run before the
first warm-up, with a reason that says what to change. Real engine subprocess, real local servers;
each window is long (30 s), so only the preflight can end these runs in seconds."""

from __future__ import annotations

import json
import time

import pytest

from portal.lib.runs.protocol import ArmSpec, EngineConfig, PathSpec
from tests.engine_config import engine_config
from tests.h2_servers import GoAwayServer
from tests.servers import AuthPages, LocalServer, ServerSoftware, closed_port, redirecting_pages
from workers.engine.preflight import (
    BODY_SHOWN_BYTES,
    INSECURE_HINT,
    SERVER_SOFTWARE_CHARS,
    ArmRefused,
    PreflightFailed,
    preflight,
    server_software,
    servers_seen,
)

LONG_WINDOW_S = 30.0
# Engine start-up (Locust's import) and one request per arm, on a loaded machine: far below a window.
STOPPED_WITHIN_S = 15.0


def _config(*arms: tuple[str, str], **more) -> dict:
    load = {"users": 2, "spawn_rate": 100, "warmup_s": 1.0, "duration_s": LONG_WINDOW_S, "arrival_rate": 50}
    return engine_config(dict(arms), **{**load, **more})


def _stopped(engine, config: dict) -> tuple[dict, list[dict]]:
    """Run the engine; it must stop in its preflight: exit 3, no arm, no second of load."""
    started = time.monotonic()
    messages, code, stderr = engine(config)
    elapsed = time.monotonic() - started
    assert code == 3, stderr
    assert elapsed < STOPPED_WITHIN_S, elapsed
    assert not [m for m in messages if m["type"] in ("arm", "progress", "capacity", "generator", "done")]
    errors = [m for m in messages if m["type"] == "arm_error"]
    assert len(errors) == 1 and errors[0]["preflight"] is True, errors
    return errors[0], messages


def test_a_self_signed_certificate_stops_the_run_before_the_plain_arm_is_measured(
    engine, plain_server, tls_server
):
    arms = (("plain", plain_server.url()), ("tls", tls_server.url()), ("tls_new", tls_server.url()))
    error, messages = _stopped(engine, _config(*arms, verify_tls=True))
    assert error["arm"] == "tls"
    assert error["error"].startswith(f"preflight of {tls_server.url()} failed: TLS certificate verification ")
    assert "CERTIFICATE_VERIFY_FAILED" in error["error"] and error["error"].endswith(INSECURE_HINT)
    assert "untick Verify TLS / `--insecure` / `verify_tls: false`" in INSECURE_HINT
    # Counted by the servers: plain got its one preflight request and nothing more; the TLS server
    # never completed a handshake (no TLS facts, no matrix, no warm-up).
    assert plain_server.counters.snapshot()["requests"] == 1
    assert tls_server.counters.snapshot()["handshakes"] == 0
    assert not [m for m in messages if m["type"] == "tls_info"]


def test_a_closed_tls_port_stops_the_run_before_the_plain_arm_is_measured(engine, plain_server):
    dead = f"https://127.0.0.1:{closed_port()}/1k"
    error, _ = _stopped(engine, _config(("plain", plain_server.url()), ("tls", dead)))
    assert error["arm"] == "tls" and error["url"] == dead
    assert error["error"].startswith(f"preflight of {dead} failed: target unreachable (connection_refused: ")
    assert plain_server.counters.snapshot()["requests"] == 1


def test_an_answer_outside_the_expected_set_shows_its_status_and_first_body_bytes_escaped(engine):
    token = "s3cret-t0ken-value"
    # Quotes, a line break, a right-to-left override and an echo of the credentials, then far more
    # than is shown.
    body = f'<h1>Not "here"</h1>\r\n\u202e{token} and Bearer {token}.'.encode() + b"x" * 5000

    def refusing(request):
        if request.path == "/1k":
            return 200, {"Content-Type": "text/html"}, b"page"
        return 404, {"Content-Type": "text/html"}, body

    server = LocalServer(app=refusing).start()
    try:
        config = _config(
            ("plain", server.url()),
            ("plain_new", server.url("/missing")),
            headers={"Authorization": f"Bearer {token}"},
            headers_over_http=True,
        )
        error, _ = _stopped(engine, config)
    finally:
        server.stop()
    reason = error["error"]
    assert error["arm"] == "plain_new"
    assert reason.startswith(
        f"preflight of {server.url('/missing')} failed: it answered 404, outside the expected set (2xx); "
        f'body ({len(body):,} bytes) begins "<h1>Not \\"here\\"</h1>\\r\\n\\u202e[credentials] and '
        "[credentials].xxx"
    )
    assert token not in reason and "\u202e" not in reason and "\n" not in reason
    shown = json.loads(reason[reason.index(" begins ") + 8 : -1])
    assert len(shown) == BODY_SHOWN_BYTES and reason.endswith('xxx"…')


@pytest.mark.parametrize("arm", ["plain", "plain_new"])
def test_a_chunked_answer_shows_its_data_not_its_framing(arm):
    """``preflight`` itself on this thread (no engine): keep-alive and new-connection policies."""

    def chunked(request):
        if request.path == "/1k":
            return 200, {"Content-Type": "text/html"}, b"page"
        body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n"
        return 503, {"Transfer-Encoding": "chunked"}, body

    server = LocalServer(app=chunked).start()
    paths = [PathSpec("/1k"), PathSpec("/busy")]  # the second answer, on a kept-alive connection for plain
    config = EngineConfig(arms=[ArmSpec(arm, server.url())], paths=paths, timeout_s=5)
    try:
        with pytest.raises(PreflightFailed) as failed:
            preflight(config, config.arms[0], {})
    finally:
        server.stop()
    assert failed.value.url == server.url("/busy")
    assert (
        str(failed.value) == 'it answered 503, outside the expected set (2xx); body (11 bytes): "hello world"'
    )


def test_credentials_that_are_missing_or_rejected_are_named(engine):
    server = LocalServer(app=AuthPages("Bearer right-token")).start()
    try:
        missing, _ = _stopped(engine, _config(("plain", server.url())))
        rejected, _ = _stopped(
            engine,
            _config(
                ("plain", server.url()), headers={"Authorization": "Bearer wrong"}, headers_over_http=True
            ),
        )
    finally:
        server.stop()
    none = "it answered 401 (it asks for credentials; none are configured), outside the expected set"
    assert none in missing["error"]
    assert "it answered 401 (the credentials sent were rejected), outside" in rejected["error"]
    assert rejected["error"].endswith('body (2 bytes): "no"')


def test_a_path_of_a_mixed_path_run_that_is_missing_stops_the_run(engine, plain_server):
    paths = [{"path": "/1k", "weight": 3}, {"path": "/nowhere?q=1", "weight": 1}]
    error, _ = _stopped(engine, _config(("plain", plain_server.url()), paths=paths))
    assert error["error"] == (
        f"preflight of {plain_server.url('/nowhere?q=1')} failed: it answered 404, outside the expected "
        'set (2xx); body (9 bytes): "not found"'
    )
    assert plain_server.counters.snapshot()["requests"] == 2  # one per path


def test_a_redirect_not_followed_says_where_it_points(engine):
    server = LocalServer(app=redirecting_pages).start()
    try:
        error, _ = _stopped(engine, _config(("plain", server.url("/old")), follow_redirects=False))
    finally:
        server.stop()
    said = 'answered 301 (a redirect to "/1k", not followed), outside the expected set (2xx); empty body'
    assert said in error["error"]


def test_an_expected_status_passes_the_preflight_and_is_measured(engine, plain_server):
    config = _config(("plain", plain_server.url("/gone")), expected_status=[404], duration_s=0.5)
    config["warmup_s"] = 0.2
    messages, code, stderr = engine(config)
    assert code == 0, stderr
    arm = next(m for m in messages if m["type"] == "arm")
    assert set(arm["result"]["status_codes"]) == {"404"} and arm["result"]["failures"] == 0


def test_a_distributed_run_stops_in_the_preflight_before_its_workers_start(engine, plain_server):
    dead = f"https://127.0.0.1:{closed_port()}/1k"
    error, _ = _stopped(engine, _config(("plain", plain_server.url()), ("tls", dead), generators=2))
    assert error["arm"] == "tls" and "connection_refused" in error["error"]
    assert plain_server.counters.snapshot()["requests"] == 1


def test_the_preflight_keeps_the_server_header_trimmed_capped_and_printable(tls_cert, tmp_path):
    """``preflight`` itself on this thread (no engine), over HTTP/1.1 (plain and TLS) and HTTP/2: the
    ``Server`` header of each arm's answer, as ``server_software`` reports it."""
    named = ServerSoftware("  nginx/1.26.0")  # http.server adds a blank after it: both trimmed
    plain = LocalServer(app=named).start()
    tls = LocalServer(tls=tls_cert, app=ServerSoftware("Apache/2.4 (Unix)\x1b[31m " + "x" * 300)).start()
    arms = [ArmSpec("plain", plain.url()), ArmSpec("tls", tls.url())]
    config = EngineConfig(arms=arms, verify_tls=False, timeout_s=5)
    try:
        ready = {arm.name: preflight(config, arm, {}) for arm in arms}
    finally:
        plain.stop()
        tls.stop()
    assert ready["plain"].server == "nginx/1.26.0"
    assert ready["tls"].server == "Apache/2.4 (Unix)?[31m " + "x" * (SERVER_SOFTWARE_CHARS - 23)
    assert len(ready["tls"].server) == SERVER_SOFTWARE_CHARS
    assert servers_seen(ready, arms) == {"tls": ready["tls"].server, "plain": "nginx/1.26.0"}
    assert servers_seen({"plain": ready["plain"]}, arms[:1]) == {"tls": None, "plain": "nginx/1.26.0"}
    # HTTP/2 (its headers come as HPACK fields): sent, and not sent at all.
    for header, expected in (("h2test/0.1", "h2test/0.1"), (None, None)):
        with GoAwayServer(tmp_path, server=header) as server:
            h2 = ArmSpec("h2", server.url())
            h2_config = EngineConfig(arms=[h2], verify_tls=False, timeout_s=5)
            assert preflight(h2_config, h2, {}).server == expected
    assert server_software("   ") is None and server_software(None) is None


def test_a_plain_arm_on_the_tls_port_is_refused_for_its_own_protocol_never_http2(tls_server):
    """Issue 31: the TLS port given as the plain URL. The plain HTTP/1.1 arm is refused (the run
    measures the others) saying its port speaks TLS, and nothing about HTTP/2, which it never asked
    for; h2c there is refused for HTTP/2, as before."""
    wrong = f"http://127.0.0.1:{tls_server.port}/1k"
    config = EngineConfig(arms=[ArmSpec("plain", wrong), ArmSpec("h2c", wrong)], timeout_s=5)
    with pytest.raises(ArmRefused) as refused:
        preflight(config, config.arms[0], {})
    said = str(refused.value)
    assert said == (
        f"plain refused: port {tls_server.port} speaks TLS, not plain HTTP (it completed a TLS handshake): "
        "give the plain URL the server's http port"
    )
    assert "HTTP/2" not in said
    with pytest.raises(ArmRefused, match="h2c refused: the server does not speak HTTP/2 with prior"):
        preflight(config, config.arms[1], {})


def test_nginx_answering_400_to_plain_http_on_its_tls_port_refuses_the_plain_arm_the_same_way():
    """nginx does not reset a plain request on its TLS port: it answers 400 "The plain HTTP request
    was sent to HTTPS port". The arm is refused for the same reason, not failed for its status."""
    from bench.nginx import Nginx

    try:
        nginx = Nginx().start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        wrong = f"http://127.0.0.1:{nginx.tls_port}/1k"
        config = EngineConfig(arms=[ArmSpec("plain", wrong)], timeout_s=5)
        with pytest.raises(
            ArmRefused, match=f"plain refused: port {nginx.tls_port} speaks TLS, not plain HTTP"
        ):
            preflight(config, config.arms[0], {})
    finally:
        nginx.stop()
