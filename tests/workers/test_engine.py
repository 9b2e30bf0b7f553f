"""The engine subprocess against real local servers; wire facts are counted on the server side."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from hdrh.histogram import HdrHistogram

from portal.lib.runs.protocol import EXIT_BAD_CONFIG
from tests.conftest import ROOT
from tests.engine_config import engine_config
from tests.servers import LocalServer, Paced, PassesPreflight, closed_port


def config(
    *arms: tuple[str, str],
    users: int = 2,
    warmup_s: float = 0.5,
    duration_s: float = 1.5,
    rate: float | None = 100,
) -> dict:
    """Open loop at ``rate`` req/s by default: samples enough for what these tests check, without a core
    burnt flat out beside the other tests; ``rate=None`` for the closed loop."""
    return engine_config(
        dict(arms),
        users=users,
        spawn_rate=100,
        warmup_s=warmup_s,
        duration_s=duration_s,
        arrival_rate=rate or None,
    )


def arm_results(messages: list[dict]) -> dict[str, dict]:
    return {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}


def probe_connections(messages: list[dict]) -> int:
    """Connections the TLS facts' accept probe opened to the first TLS arm's server (one short
    handshake per group and signature algorithm it asks about, workers/engine/tls/acceptance.py)."""
    (info,) = [m["info"] for m in messages if m["type"] == "tls_info"]
    return info["accept_probe"]["handshakes"]


def test_tls_new_does_a_full_handshake_for_every_request(engine, tls_server):
    messages, code, stderr = engine(config(("tls_new", tls_server.url())))
    assert code == 0, stderr
    result = arm_results(messages)["tls_new"]
    seen = tls_server.counters.snapshot()
    probe = probe_connections(messages)
    # Every request the server answered came on its own connection with a full handshake:
    # preflight + warm-up + measured (+ requests cut off at the stop, which never completed).
    # The one resumed session is the TLS-facts probe's reconnect, which tests resumption on purpose.
    assert seen["resumed"] == 1
    # A connection accepted as the swarm stopped may never finish its handshake (one per user); the
    # accept probe's connections end after their handshake (some refused), without a request.
    assert 0 <= seen["connections"] - seen["handshakes"] <= 2 + probe
    assert seen["handshakes"] >= seen["requests"] >= 1 + result["warmup_requests"] + result["requests"]
    # At most one cut-off connection per user, plus the TLS-facts probe's two (it sends HEAD, which
    # this server does not count as a request).
    assert seen["connections"] - probe - seen["requests"] <= 2 + 2
    assert result["connections_opened"] == result["requests"]
    assert result["tls_sessions_reused"] == 0
    assert result["hist"]["tls_handshake_us"] and result["hist"]["connect_us"]


def test_keepalive_tls_handshakes_once_per_user(engine, tls_server):
    messages, code, stderr = engine(config(("tls", tls_server.url()), users=3))
    assert code == 0, stderr
    result = arm_results(messages)["tls"]
    seen = tls_server.counters.snapshot()
    # One per virtual user, plus the preflight request and the TLS-facts probe (openssl s_client:
    # a handshake and a reconnect that resumes it), besides the accept probe's short handshakes.
    assert seen["connections"] - probe_connections(messages) == 3 + 1 + 2
    assert result["requests"] > 10 * 3
    # Warm connections: nothing was opened inside the measured window.
    assert result["connections_opened"] == 0
    assert result["hist"]["tls_handshake_us"] is None


def test_tls_resumed_really_resumes(engine, tls_server):
    messages, code, stderr = engine(config(("tls_resumed", tls_server.url()), users=2))
    assert code == 0, stderr
    result = arm_results(messages)["tls_resumed"]
    seen = tls_server.counters.snapshot()
    # Only the preflight, the TLS-facts probe's first connection and each user's first connection
    # are full handshakes, besides the accept probe's short ones (it opens a connection or two more
    # than the handshakes it counts: the ones that end before their answer can be read).
    assert 0 <= seen["connections"] - probe_connections(messages) - seen["resumed"] - (1 + 1 + 2) <= 2
    assert result["tls_sessions_reused"] == result["requests"] > 0


def test_latencies_are_microsecond_histograms_without_warmup(engine, plain_server):
    messages, code, stderr = engine(config(("plain", plain_server.url("/2k"))))
    assert code == 0, stderr
    result = arm_results(messages)["plain"]
    ttfb = HdrHistogram.decode(result["hist"]["ttfb_us"])
    ttlb = HdrHistogram.decode(result["hist"]["ttlb_us"])
    assert ttlb.get_total_count() == ttfb.get_total_count() == result["requests"] > 0
    assert result["warmup_requests"] > 0
    assert plain_server.counters.snapshot()["requests"] >= result["requests"] + result["warmup_requests"] + 1
    # Loopback requests take tens to thousands of µs: whole-ms rounding would show 0 or 1 here.
    assert 1 <= ttfb.get_value_at_percentile(50) <= ttlb.get_value_at_percentile(50) < 1_000_000
    assert result["status_codes"] == {"200": result["requests"]}
    assert result["response_bytes"] == {"min": 2048, "max": 2048}
    assert 1.4 < result["measured_s"] < 2.5
    assert len(result["series"]) == 1  # one full second in a 1.5 s window
    point = result["series"][0]
    assert point["requests"] > 0 and point["p50_us"] > 0 and point["gen_cpu_pct"] >= 0


def test_series_points_carry_ttfb_percentiles_of_the_same_second(engine):
    """Headers at once, the body 100 ms later: every second's TTFB percentiles sit well below 100 ms
    (a loaded machine adds tens of ms, seen: a p95 of 16 ms) and its TTLB ones above it, so the
    series' TTFB figures come from the first byte, not the last."""

    def late_body(request):
        return 200, {"Content-Type": "text/plain"}, Paced([(0.1, b"x" * 512)])

    server = LocalServer(app=late_body).start()
    try:
        arm = ("plain", server.url("/late"))
        messages, code, stderr = engine(config(arm, users=4, duration_s=2.5, rate=None))
    finally:
        server.stop()
    assert code == 0, stderr
    result = arm_results(messages)["plain"]
    assert len(result["series"]) == 2 and result["response_bytes"] == {"min": 512, "max": 512}
    for point in result["series"]:
        assert point["requests"] > 10
        assert 1 <= point["ttfb_p50_us"] <= point["ttfb_p95_us"] < 60_000 < 100_000 <= point["p50_us"]
        assert point["ttfb_p95_us"] < point["p95_us"]
    whole_ttfb = HdrHistogram.decode(result["hist"]["ttfb_us"])
    # The window's own TTFB histogram agrees with the per-second medians (same requests, same clock).
    medians = sorted(point["ttfb_p50_us"] for point in result["series"])
    assert medians[0] / 2 <= whole_ttfb.get_value_at_percentile(50) <= medians[-1] * 2


def test_unexpected_status_counts_as_failure(engine):
    # The preflight's answer is a page: the 503s start with the load.
    busy = PassesPreflight(lambda request: (503, {"Content-Type": "text/plain"}, b"busy"))
    server = LocalServer(app=busy).start()
    try:
        messages, code, stderr = engine(config(("plain", server.url("/1k"))))
    finally:
        server.stop()
    assert code == 0, stderr
    result = arm_results(messages)["plain"]
    assert result["requests"] > 0
    assert result["failures"] == result["requests"]
    assert result["status_codes"] == {"503": result["requests"]}


def test_an_unreachable_arm_stops_the_engine_before_any_arm_is_measured(engine, plain_server):
    dead = f"https://127.0.0.1:{closed_port()}/1k"
    messages, code, stderr = engine(config(("plain", plain_server.url()), ("tls", dead)))
    assert code == 3, stderr
    assert not arm_results(messages)
    assert plain_server.counters.snapshot()["requests"] == 1  # plain's preflight, no warm-up
    errors = [m for m in messages if m["type"] == "arm_error"]
    assert errors == [
        {
            "type": "arm_error",
            "arm": "tls",
            "error": errors[0]["error"],
            "preflight": True,
            "url": dead,
        }
    ]
    assert errors[0]["error"].startswith(f"preflight of {dead} failed: target unreachable (connection_ref")


def test_sigterm_cuts_the_arm_short_and_keeps_it(plain_server):
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "workers.engine"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    proc.stdin.write(json.dumps(config(("plain", plain_server.url()), warmup_s=0.2, duration_s=30)))
    proc.stdin.close()
    for line in proc.stdout:
        message = json.loads(line)
        if message["type"] == "progress" and message["phase"] == "measure":
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    rest = [json.loads(line) for line in proc.stdout]
    assert proc.wait(timeout=20) == 0
    arm = next(m for m in rest if m["type"] == "arm")
    assert arm["result"]["complete"] is False
    assert 0 < arm["result"]["measured_s"] < 10
    assert arm["result"]["requests"] > 0
    assert rest[-1] == {"type": "done", "status": "cancelled"}


def test_a_config_outside_the_specs_bounds_exits_2_naming_the_field(plain_server):
    """Bad JSON or a field outside RunSpec's bounds: exit code 2 (EXIT_BAD_CONFIG) and the reason on
    stderr, before anything is sent to the target; never a traceback with exit code 1."""
    refused = {**config(("plain", plain_server.url())), "users": 0}  # the builder refuses it itself
    bad = {"users": json.dumps(refused), "JSON": "{not json"}
    for named, text in bad.items():
        done = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "workers.engine"], input=text, capture_output=True, text=True, cwd=ROOT,
            timeout=60,
        )  # fmt: skip
        assert done.returncode == EXIT_BAD_CONFIG, done.stderr[-2000:]
        assert "tollgate engine: bad config:" in done.stderr and named in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""


def test_open_loop_counts_latency_from_the_scheduled_start(engine):
    """A server that needs 40 ms, asked 50 times a second by one user: the user falls behind, and
    the queueing shows in the latency (no coordinated omission) instead of a quietly lower rate."""

    def slow(request):
        time.sleep(0.04)
        return 200, {"Content-Type": "text/plain"}, b"ok"

    server = LocalServer(app=slow).start()
    try:
        closed, code1, err1 = engine(config(("plain", server.url("/s")), users=1, duration_s=2.0, rate=None))
        opened, code2, err2 = engine(config(("plain", server.url("/s")), users=1, duration_s=2.0, rate=50))
    finally:
        server.stop()
    assert code1 == code2 == 0, err1 + err2
    closed_p50 = HdrHistogram.decode(arm_results(closed)["plain"]["hist"]["ttlb_us"]).get_value_at_percentile(
        50
    )
    result = arm_results(opened)["plain"]
    open_p50 = HdrHistogram.decode(result["hist"]["ttlb_us"]).get_value_at_percentile(50)
    assert 40_000 <= closed_p50 < 80_000
    assert open_p50 > 2 * closed_p50  # the backlog behind the schedule is part of the latency
    assert result["late_requests"] >= result["requests"] // 2 and result["max_schedule_lag_us"] > 100_000
    assert result["arrival_rate"] == 50


def test_weighted_paths_go_to_each_arms_origin(engine, plain_server, tls_server):
    cfg = config(("plain", plain_server.url("/")), ("tls", tls_server.url("/")))
    cfg["paths"] = [{"path": "/1k", "weight": 1}, {"path": "/2k", "weight": 1}]
    messages, code, stderr = engine(cfg)
    assert code == 0, stderr
    for name, result in arm_results(messages).items():
        assert result["sizes_by_url"] == {"/1k": [1024], "/2k": [2048]}, name
        assert result["status_codes"] == {"200": result["requests"]}
    arms = [m for m in messages if m["type"] == "arm"]
    assert arms[0]["targets"] == [
        {"path": "/1k", "weight": 1, "requested": "/1k"},
        {"path": "/2k", "weight": 1, "requested": "/2k"},
    ]
    assert arms[0]["url"] == plain_server.url("/1k") and arms[0]["requested_url"] == plain_server.url("/")


def test_a_bundled_run_measures_every_arm_on_pyopenssl(engine, plain_server, tls_cert):
    """tls_library bundled: every TLS arm through pyOpenSSL, the wire facts counted by the servers
    (one server per TLS arm, so each arm's handshakes and resumptions are its own)."""
    import OpenSSL
    from OpenSSL import SSL

    servers = {arm: LocalServer(tls=tls_cert).start() for arm in ("tls", "tls_new", "tls_resumed")}
    try:
        arms = [("plain", plain_server.url())] + [(arm, server.url()) for arm, server in servers.items()]
        messages, code, stderr = engine({**config(*arms), "tls_library": "bundled"})
        seen = {arm: server.counters.snapshot() for arm, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    assert code == 0, stderr
    hello = next(m for m in messages if m["type"] == "hello")
    assert hello["engine"]["tls_library"] == {
        "choice": "bundled",
        "openssl": SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode(),
        "binding": f"pyOpenSSL {OpenSSL.__version__}",
    }
    # The HTTP/2 arms' library: libnghttp2 (CI installs it; docs/performance.md, "HTTP/2 on libnghttp2").
    assert hello["engine"]["http2"].startswith("libnghttp2 1."), hello["engine"]["http2"]
    results = arm_results(messages)
    assert all(results[arm]["requests"] > 0 and results[arm]["failures"] == 0 for arm in results)
    assert set(results) == {"plain", "tls", "tls_new", "tls_resumed"}
    # tls: one handshake per user, the preflight's, and the TLS-facts probe's two (one resumes),
    # besides the accept probe's short handshakes (the first TLS arm's server gets them).
    assert seen["tls"]["connections"] - probe_connections(messages) == 2 + 1 + 2
    assert seen["tls"]["resumed"] == 1
    # tls_new: a full handshake for every request, never a resumption.
    new = results["tls_new"]
    assert seen["tls_new"]["resumed"] == 0 and new["tls_sessions_reused"] == 0
    assert (
        seen["tls_new"]["handshakes"]
        >= seen["tls_new"]["requests"]
        >= 1 + new["warmup_requests"] + new["requests"]
    )
    assert new["connections_opened"] == new["requests"] and new["hist"]["tls_handshake_us"]
    # tls_resumed: only the preflight's and each user's first connection are full handshakes.
    resumed = results["tls_resumed"]
    assert seen["tls_resumed"]["handshakes"] - seen["tls_resumed"]["resumed"] == 1 + 2
    assert resumed["tls_sessions_reused"] == resumed["requests"] > 0


def test_a_system_run_names_ssl(engine, tls_server):
    import ssl

    messages, code, stderr = engine(config(("tls_new", tls_server.url()), duration_s=1))
    assert code == 0, stderr
    hello = next(m for m in messages if m["type"] == "hello")
    assert hello["engine"]["tls_library"] == {
        "choice": "system",
        "openssl": ssl.OPENSSL_VERSION,
        "binding": "ssl",
    }


def test_a_bundled_matrix_measures_groups_and_certificates_as_the_server_saw_them(engine, tmp_path):
    from tests.pyossl_server import PyOpenSSLServer

    # RSA and ECDSA, no Ed25519: that variant is the server's refusal.
    with PyOpenSSLServer(tmp_path) as server:
        messages, code, stderr = engine(
            {
                **config(("tls_new", server.url()), users=1, warmup_s=0.2, duration_s=0.4, rate=40),
                "tls_library": "bundled",
                "tls_matrix": ["group", "cert"],
            }
        )
        seen = server.counters.snapshot()
    assert code == 0, stderr
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    entries = {v["name"]: v for v in matrix["variants"]}
    assert len(entries) == 3 * 3
    for name, entry in entries.items():
        if name.endswith("+ed25519"):
            assert entry["status"] == "refused" and "server refused the handshake" in entry["detail"]
        else:
            assert entry["status"] == "measured", entry["detail"]
    results = arm_results(messages)
    assert set(results) == {"tls_new"} | {n for n, e in entries.items() if e["status"] == "measured"}
    assert all(r["failures"] == 0 for r in results.values())
    names = {"x25519mlkem768": "X25519MLKEM768", "x25519": "x25519", "p256": "secp256r1"}
    types = {"rsa": "RSA", "ecdsa": "EC"}
    for name, entry in entries.items():
        if entry["status"] != "measured":
            continue
        group, cert = entry["variant"]["group"], entry["variant"]["cert"]
        assert entry["negotiated"]["group"] == names[group]
        assert entry["negotiated"]["cert_key_type"] == types[cert]
        # Every handshake of the sub-arm, as the server counted it: its probe's, its warm-up's and its
        # window's, each with the variant's group and certificate (a handshake per request).
        result = results[name]
        assert seen["pairs"][("TLSv1.3", names[group], types[cert])] >= (
            1 + result["warmup_requests"] + result["requests"]
        ), name
    # The server's failed handshakes include the three Ed25519 probes (its own reason); the TLS facts'
    # accept probe asks it about groups and signature algorithms it lacks too, so others fail as well.
    refused = [e for e in seen["errors"] if "no suitable signature algorithm" in e]
    assert len(refused) >= 3
