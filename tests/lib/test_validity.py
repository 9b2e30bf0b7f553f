"""Thresholds of the validity checks on hand-made arm sections (the live tests fire them for real)."""

from __future__ import annotations

from portal.lib.report import evidence
from portal.lib.stats import hdr
from portal.lib.validity import answers, check_all, connections, content, measurement


def arm(requests: int = 2000, **extra) -> dict:
    base = {
        "requests": requests,
        "rps": requests / 10,
        "status_codes": {"200": requests},
        "errors": {},
        "sizes_by_path": {"/1k": [1024]},
        "series": [],
        "ttlb_us": {"count": requests},
        "hdr": {},
        "connections_opened": 0,
        "tls_sessions_reused": 0,
    }
    base.update(extra)
    return base


def series(cpu: list[float], lag: float = 0.2, p50: list[int] | None = None) -> list[dict]:
    p50 = p50 or [500] * len(cpu)
    return [
        {"gen_cpu_pct": c, "loop_lag_ms": lag, "p50_us": p, "requests": 100}
        for c, p in zip(cpu, p50, strict=True)
    ]


def test_generator_saturation_threshold_is_on_the_median_cpu():
    hot = measurement.check_generator({}, {"plain": arm(series=series([84, 90, 95]))})
    cool = measurement.check_generator({}, {"plain": arm(series=series([84, 84, 99]))})
    assert (hot["status"], cool["status"]) == ("warn", "pass")
    assert hot["evidence"]["plain"]["cpu_pct_median"] == 90


def test_generator_saturation_fires_on_loop_lag_alone():
    laggy = measurement.check_generator({}, {"plain": arm(series=series([20, 20, 20], lag=12.0))})
    assert laggy["status"] == "warn" and "event-loop lag 12.0 ms" in laggy["detail"]


def test_drift_compares_halves_and_needs_both_relative_and_absolute_change():
    slower = measurement.check_drift(
        {"plain": arm(series=series([10] * 6, p50=[1000, 1000, 1000, 1400, 1400, 1400]))}
    )
    assert slower["status"] == "warn" and slower["evidence"]["plain"]["p50_us"]["change_pct"] == 40.0
    # +40% but only +40 µs: loopback jitter, not drift.
    tiny = measurement.check_drift(
        {"plain": arm(series=series([10] * 6, p50=[100, 100, 100, 140, 140, 140]))}
    )
    assert tiny["status"] == "pass"
    short = measurement.check_drift({"plain": arm(series=series([10] * 3))})
    assert short["status"] == "skip" and "Not judged" in short["detail"] and short["findings"] == []


def test_sample_size_levels():
    assert measurement.check_sample_size({"a": arm(1000)})["status"] == "pass"
    few = measurement.check_sample_size({"a": arm(999)})
    assert few["status"] == "warn" and few["evidence"]["a"]["too_few_for"] == ["p99"]
    assert measurement.check_sample_size({"a": arm(19)})["status"] == "fail"


def test_syn_retransmit_counts_connects_near_one_and_three_seconds():
    h = hdr.new_histogram()
    for value in [400] * 50 + [1_010_000] * 3 + [3_020_000] * 2 + [2_000_000]:
        h.record_value(value)
    found = measurement.check_syn_retransmit(
        {"plain_new": arm(hdr={"connect_us": h.encode().decode()}, connections_opened=56)}
    )
    assert found["status"] == "warn"
    assert found["evidence"]["plain_new"] == {
        "slow_connects": 6,
        "near_1s": 3,
        "near_3s": 2,
        "near_7s": 0,
        "connections": 56,
    }


def test_status_codes_respect_the_expected_set():
    arms = {"plain": arm(status_codes={"200": 10, "204": 5})}
    assert answers.check_status_codes({"expected_status": [200]}, arms)["status"] == "fail"
    assert answers.check_status_codes({"expected_status": [200, 204]}, arms)["status"] == "pass"
    assert answers.check_status_codes({}, arms)["status"] == "pass"  # default: any 2xx
    assert answers.expected_label(list(range(200, 300)) + [301]) == "2xx, 301"


def test_errors_warn_below_one_percent_and_fail_above():
    some = {"count": 5, "samples": ["TimeoutError"]}
    assert answers.check_errors({"a": arm(1000, errors={"timeout": some})})["status"] == "warn"
    many = {"count": 50, "samples": ["TimeoutError"]}
    assert answers.check_errors({"a": arm(1000, errors={"timeout": many})})["status"] == "fail"


def test_content_length_warns_about_a_size_that_varies_within_an_arm():
    varying = {"plain": arm(sizes_by_path={"/p": [900, 1000]}), "tls": arm(sizes_by_path={"/p": [950]})}
    found = content.check_content_length(varying)
    assert (found["status"], found["arms"]) == ("warn", ["plain"])
    same = {"plain": arm(), "tls": arm()}
    assert content.check_content_length(same)["status"] == "pass"
    nothing = {"plain": arm(sizes_by_path={})}
    assert content.check_content_length(nothing)["status"] == "skip"


def test_tls_sessions_fail_when_tls_new_resumes():
    found = connections.check_tls_sessions({"tls_new": arm(connections_opened=10, tls_sessions_reused=2)})
    assert found["status"] == "fail" and "must do full handshakes" in found["detail"]
    assert found["arms"] == ["tls_new"]


def test_tls_sessions_judge_the_mtls_arm_as_full_handshakes_too():
    both = {
        "tls_new": arm(connections_opened=300, tls_handshake_us={"count": 300}),
        "tls_mtls": arm(connections_opened=280, tls_handshake_us={"count": 280}),
    }
    held = connections.check_tls_sessions(both)
    assert held["status"] == "pass" and held["evidence"]["tls_mtls"] == {"reused": 0, "connections": 280}
    assert "tls_mtls did a full handshake on each of its 280 connections" in held["detail"]
    # A resumed mTLS session presented no certificate: the arm fails, and with it the client_certificate
    # cost (its finding names tls_mtls only, so the tls_new costs keep their verdicts).
    resumed = connections.check_tls_sessions(
        {**both, "tls_mtls": arm(connections_opened=280, tls_sessions_reused=7)}
    )
    assert resumed["status"] == "fail" and resumed["arms"] == ["tls_mtls"]
    assert resumed["findings"][0]["reason"] == (
        "tls_mtls resumed 7 of 280 handshakes (it must do full handshakes: a resumed session skips the "
        "client certificate and its check)"
    )
    costs = [
        {"name": n, "arm": a, "base": b, "metric": "ttlb_p50_us", "verdict": "noticeable"}
        for n, a, b in (("client_certificate", "tls_mtls", "tls_new"), ("handshake", "tls_new", "plain_new"))
    ]
    judged = {c["name"]: c for c in evidence.judge_costs(costs, [resumed], {})}
    assert (
        judged["client_certificate"]["verdict"] is None
        and "tls_mtls resumed 7" in (judged["client_certificate"]["not_judged"])
    )
    assert judged["handshake"]["verdict"] == "noticeable"
    alone = connections.check_tls_sessions(
        {"tls_mtls": arm(connections_opened=50, tls_handshake_us={"count": 50})}
    )
    assert alone["status"] == "pass" and list(alone["evidence"]) == ["tls_mtls"]


def test_tls_sessions_fail_the_resumed_arm_that_did_not_resume():
    found = connections.check_tls_sessions(
        {
            "tls_new": arm(connections_opened=4210),
            "tls_resumed": arm(connections_opened=4210, tls_handshake_us={"count": 4210}),
        }
    )
    assert found["status"] == "fail" and found["arms"] == ["tls_resumed"]
    assert found["findings"][0]["reason"] == "tls_resumed did not resume — 0 of 4,210 handshakes resumed"
    # 89% is not enough, 90% is.
    few = connections.check_tls_sessions({"tls_resumed": arm(connections_opened=100, tls_sessions_reused=89)})
    assert few["status"] == "fail" and "resumed only 89%" in few["detail"]
    enough = connections.check_tls_sessions(
        {"tls_resumed": arm(connections_opened=100, tls_sessions_reused=90)}
    )
    assert enough["status"] == "pass"


def test_keepalive_warns_on_reopened_connections_and_fails_from_five_percent():
    # Apache's MaxKeepAliveRequests 100: 1% of requests pay a new connection and a TLS handshake.
    apache = connections.check_keepalive(
        {
            "plain": arm(10_000, users=10, connections_opened=0, connections_reopened=0),
            "tls": arm(10_000, users=10, connections_opened=100, connections_reopened=100),
            "tls_new": arm(10_000, connections_opened=10_000, connections_reopened=0),  # not a keep-alive arm
        }
    )
    assert apache["status"] == "warn" and apache["arms"] == ["tls"]
    assert apache["evidence"]["tls"] == {
        "users": 10,
        "requests": 10_000,
        "connections_opened": 100,
        "connections_reopened": 100,
        "new_connection_share": 0.01,
        "requests_per_connection": 100.0,
    }
    assert apache["findings"][0]["reason"] == (
        "tls: the server closed its connections, 100 reopened (100 opened for 10,000 requests by 10 users, "
        "about 100 requests each): 1.0% of requests paid a new connection and a TLS handshake"
    )
    assert "MaxKeepAliveRequests" in apache["detail"] and "tls_new" not in apache["evidence"]
    # nginx keepalive_requests 5: a fifth of the requests; just under and at the threshold.
    every_fifth = connections.check_keepalive(
        {"plain": arm(1000, users=2, connections_opened=200, connections_reopened=198)}
    )
    assert (
        every_fifth["status"] == "fail"
        and "20.0% of requests paid a new TCP connection" in every_fifth["detail"]
    )
    under = connections.check_keepalive(
        {"tls": arm(1000, users=2, connections_opened=49, connections_reopened=47)}
    )
    at = connections.check_keepalive(
        {"tls": arm(1000, users=2, connections_opened=50, connections_reopened=48)}
    )
    assert (under["status"], at["status"]) == ("warn", "fail")
    # The first connection of each user in the window (no warm-up) is not a reopening.
    cold = connections.check_keepalive(
        {"tls@1.3": arm(1000, users=4, connections_opened=4, connections_reopened=0)}
    )
    assert cold["status"] == "pass" and cold["evidence"]["tls@1.3"]["new_connection_share"] == 0.004


def test_keepalive_skips_arms_stored_before_the_count_and_runs_without_keep_alive_arms():
    old = connections.check_keepalive({"plain": arm(connections_opened=0), "tls": arm(connections_opened=0)})
    assert old["status"] == "skip" and old["detail"] == (
        "Not judged: plain (stored before the engine counted reopened connections); tls (stored before the "
        "engine counted reopened connections)."
    )
    mixed = connections.check_keepalive(
        {"plain": arm(connections_reopened=0), "tls": arm(connections_opened=0)}
    )
    assert mixed["status"] == "pass" and "Not judged: tls (stored before" in mixed["detail"]
    assert list(mixed["evidence"]) == ["plain"]
    none = connections.check_keepalive({"tls_new": arm(connections_opened=2000, connections_reopened=0)})
    assert none["status"] == "skip" and "no keep-alive arm" in none["detail"]
    empty = connections.check_keepalive({"tls": arm(0, connections_reopened=0)})
    assert empty["status"] == "skip" and "no request in its window" in empty["detail"]


def test_checks_that_could_not_judge_say_skip_with_the_reason():
    keepalive = {"plain": arm(series=series([10] * 2)), "tls": arm(series=series([10] * 2))}
    found = {c["check"]: c for c in check_all({}, keepalive)}
    assert (
        found["tls_sessions"]["status"] == "skip"
        and "no arm opened TLS connections" in found["tls_sessions"]["detail"]
    )
    assert (
        found["syn_retransmit"]["status"] == "skip"
        and "no arm opened a TCP connection" in found["syn_retransmit"]["detail"]
    )
    assert found["drift"]["status"] == "skip"
    assert found["generator_saturation"]["status"] == "pass"  # it had seconds to judge
    no_seconds = measurement.check_generator({}, {"plain": arm()})
    assert no_seconds["status"] == "skip"
    refused = {
        "plain": arm(100, status_codes={}, errors={"connection_refused": {"count": 100, "samples": []}})
    }
    assert answers.check_status_codes({}, refused)["status"] == "skip"
    # A check that ran and held passes; every result names the arms it implicates (none when passed).
    assert all(c["arms"] == [] for c in found.values() if c["status"] in ("pass", "skip"))


def page(size: int, ctype: str = "text/html", encoding: str = "", path: str = "/1k") -> dict:
    return {
        "sizes_by_path": {path: [size]},
        "content_by_path": {path: {"content_type": [ctype], "content_encoding": [encoding]}},
        "targets": [{"path": path, "weight": 1.0, "requested": path}],
    }


def test_same_content_maps_the_arms_paths_and_names_both_arms():
    # Plain and TLS URLs differ in path: /1k and /4k are the same mapped target, and differ.
    arms = {"plain": arm(**page(1024, path="/1k")), "tls": arm(**page(4096, path="/4k"))}
    found = content.check_same_content(arms)
    assert found["status"] == "fail" and found["arms"] == ["tls", "plain"]
    assert found["findings"][0]["reason"] == "tls vs plain — /4k vs /1k: body 4,096 B vs 1,024 B"
    same_page = {"plain": arm(**page(1024, path="/a")), "tls": arm(**page(1024, path="/b"))}
    assert content.check_same_content(same_page)["status"] == "pass"


def test_same_content_fails_on_content_type_encoding_and_status_mix():
    gzip = {"plain": arm(**page(1024)), "tls": arm(**page(420, encoding="gzip"))}
    reason = content.check_same_content(gzip)["findings"][0]["reason"]
    assert "body 420 B vs 1,024 B" in reason and "Content-Encoding gzip vs identity" in reason
    json = {
        "plain": arm(**page(1024, ctype="text/html; charset=utf-8")),
        "tls": arm(**page(1024, "application/json")),
    }
    assert (
        "Content-Type application/json vs text/html;charset=utf-8"
        in content.check_same_content(json)["detail"]
    )
    spelled = {
        "plain": arm(**page(1024, ctype="text/html; charset=UTF-8")),
        "tls": arm(**page(1024, "Text/HTML;charset=utf-8")),
    }
    assert content.check_same_content(spelled)["status"] == "pass"
    mixed = {
        "plain": arm(1000, **page(1024)),
        "tls": arm(1000, status_codes={"200": 800, "404": 200}, **page(1024)),
    }
    found = content.check_same_content(mixed)
    assert found["status"] == "fail" and "status 200 80%, 404 20% vs 200 100%" in found["detail"]
    # A stray 0.5% is the status check's business, not a different mix.
    stray = {
        "plain": arm(1000, **page(1024)),
        "tls": arm(1000, status_codes={"200": 995, "503": 5}, **page(1024)),
    }
    assert content.check_same_content(stray)["status"] == "pass"


def test_same_content_compares_only_pairs_the_report_compares():
    arms = {
        "plain": arm(**page(1024)),
        "plain_new": arm(**page(1024)),
        "tls_new": arm(**page(4096)),
        "tls_resumed": arm(**page(4096)),
    }
    found = content.check_same_content(arms)
    pairs = [f["arms"] for f in found["findings"]]
    # tls_new differs from both plain arms; tls_new vs tls_resumed agree; plain_new vs plain agree.
    assert pairs == [["tls_new", "plain"], ["tls_new", "plain_new"], ["tls_resumed", "plain"]]
    assert ["tls_new", "tls_resumed"] in found["evidence"]["compared"]
    one = content.check_same_content({"plain": arm(**page(1024))})
    assert one["status"] == "skip"


def test_an_arm_where_most_attempts_failed_is_invalid():
    refused = arm(
        4000, status_codes={"200": 1000}, errors={"connection_refused": {"count": 3000, "samples": []}}
    )
    assert answers.invalid_arm({}, refused) == "75% of 4,000 attempts failed (connection_refused×3,000)"
    all_431 = arm(500, status_codes={"431": 500})
    assert answers.invalid_arm({}, all_431) == "100% of 500 attempts failed (status 431×500)"
    assert answers.invalid_arm({"expected_status": [431]}, all_431) is None
    assert answers.invalid_arm({}, arm(1000, status_codes={"200": 500, "500": 500})) is None  # half: not most
    assert answers.invalid_arm({}, arm(0, status_codes={})) == "no request was made in its measured window"


def test_a_run_none_of_whose_arms_is_valid_measured_nothing_and_says_what_the_arms_got():
    not_found = {"status_codes": {"404": 1200}}
    # The mistyped path: every arm got the same 404s.
    same = {name: arm(1200, **not_found) for name in ("plain", "tls", "tls_new")}
    assert answers.measured_nothing({}, same) == "no arm measured the page: 404 × 1,200 on every arm"
    # One kind of failure, counts that differ: the kind once, each arm's count.
    counts = {"plain": arm(1210, status_codes={"500": 1210}), "tls": arm(1190, status_codes={"500": 1190})}
    assert answers.measured_nothing({}, counts) == (
        "no arm measured the page: 500 on every arm (plain × 1,210, tls × 1,190)"
    )
    # Arms that failed differently: arm by arm, with the attempts when not all of them failed.
    refused = {"connection_refused": {"count": 3000, "samples": []}}
    mixed = {
        "plain": arm(1200, status_codes={"404": 1000, "200": 200}),
        "tls": arm(4000, status_codes={"200": 1000}, errors=refused),
        "tls_new": arm(0, status_codes={}),
    }
    assert answers.measured_nothing({}, mixed) == (
        "no arm measured the page: plain: 404 × 1,000 of 1,200 attempts; "
        "tls: connection_refused × 3,000 of 4,000 attempts; tls_new: no request in its measured window"
    )
    one = {"plain": arm(500, status_codes={"503": 400, "502": 100})}
    assert answers.measured_nothing({}, one) == "no arm measured the page: plain: 503 × 400, 502 × 100"
    # The same definition of an invalid arm as the report's: a valid arm, or 404 expected, and the
    # run measured something; no arm at all is not this function's case.
    assert answers.measured_nothing({}, {**same, "plain": arm(1200)}) is None
    assert answers.measured_nothing({"expected_status": [404]}, same) is None
    assert answers.measured_nothing({}, {}) is None


def test_an_arm_the_engine_stopped_as_unreachable_is_invalid_and_fails_the_errors_check():
    reason = "target unreachable: 97% of 1,234 attempts failed in the last 3 s (connection refused)"
    # Stopped in its window: a few refusals after the users backed off (0.2%, a warning alone).
    refused = {"connection_refused": {"count": 45, "samples": []}}
    late = arm(20_000, status_codes={"200": 19_955}, errors=refused, stopped=reason)
    assert answers.invalid_arm({}, late) == f"stopped early: {reason}"
    found = answers.check_errors({"plain": arm(), "tls": late})
    assert (found["status"], found["arms"]) == ("fail", ["tls"])
    assert (
        found["findings"][0]["reason"]
        == f"tls: stopped early, {reason} (connection_refused×45 in its window)"
    )
    assert found["evidence"]["tls"] == {"connection_refused": 45, "stopped": reason}
    # Stopped in its warm-up, the run's only arm: nothing in a window, and still a failure, not a skip.
    early = arm(0, status_codes={}, stopped=reason)
    assert answers.invalid_arm({}, early) == f"stopped early: {reason}"
    alone = answers.check_errors({"plain": early})
    assert alone["status"] == "fail" and alone["detail"].startswith(
        f"Transport errors: plain: stopped early, {reason}."
    )
    assert answers.check_errors({"plain": arm(stopped="")})["status"] == "pass"


def test_tls_sessions_judge_h2_new_and_the_matrix_sub_arms_by_their_names():
    assert [connections.must_resume(n) for n in ("tls", "plain_new", "h2", "tls@1.3", "h2@1.2")] == [None] * 5
    assert [
        connections.must_resume(n) for n in ("tls_new", "h2_new", "tls_new@1.3+x25519", "h2_new@1.2+full")
    ] == [False] * 4
    assert [
        connections.must_resume(n) for n in ("tls_resumed", "tls_new@1.3+ticket", "h2_new@1.2+sessid")
    ] == [True] * 3
    held = connections.check_tls_sessions(
        {
            "tls_new": arm(connections_opened=100, tls_handshake_us={"count": 100}),
            "tls_new@1.3+full": arm(connections_opened=90, tls_handshake_us={"count": 90}),
            "tls_new@1.3+ticket": arm(connections_opened=80, tls_sessions_reused=79),
            "tls@1.3": arm(connections_opened=2, tls_sessions_reused=1),  # keep-alive: not judged
        }
    )
    assert held["status"] == "pass" and list(held["evidence"]) == [
        "tls_new",
        "tls_new@1.3+full",
        "tls_new@1.3+ticket",
    ]
    assert held["detail"] == (
        "tls_new did a full handshake on each of its 100 connections; 2 matrix sub-arms opened sessions as "
        "their names say (1 resumed at least 90% of their handshakes, 1 never resumed)."
    )
    # h2_new offers no session: a resumption there is a failure; a ticket sub-arm that did not resume too.
    found = connections.check_tls_sessions(
        {
            "h2_new": arm(connections_opened=50, tls_sessions_reused=3),
            "h2_new@1.3+ticket": arm(connections_opened=40, tls_handshake_us={"count": 40}),
        }
    )
    assert found["status"] == "fail" and found["arms"] == ["h2_new", "h2_new@1.3+ticket"]
    assert found["findings"][1]["reason"] == "h2_new@1.3+ticket did not resume — 0 of 40 handshakes resumed"
    assert "so h2_new@1.3+ticket measured full handshakes" in found["detail"]
