"""portal.lib.stats.capacity and portal.lib.stats.saturation on synthetic curves: verdicts, knees, the
plan."""

from __future__ import annotations

import pytest

from portal.lib.stats import capacity, saturation
from portal.lib.stats.hdr import encode, new_histogram

USERS = {
    "arms": ["plain"],
    "mode": "users",
    "start": 1,
    "max": 64,
    "factor": 2.0,
    "zoom": 3,
    "stage_s": 1,
    "warmup_s": 0,
}


def point(load, rps, p50=1000, p99=2000, cpu=10.0, runq=1.0, lag=0.5, failures=0, phase="coarse", new=0.0):
    return {
        "load": load,
        "phase": phase,
        "requests": int(rps),
        "failures": failures,
        "error_rate": failures / (int(rps) + failures),
        "rps": rps,
        "new_connections_per_s": new,
        "ttlb_p50_us": p50,
        "ttlb_p99_us": p99,
        "gen_cpu_pct": cpu,
        "gen_runq_pct": runq,
        "loop_lag_ms": lag,
        "gen_cpu_us_per_request": cpu * 1e4 / rps,
    }


def capped(k: float, per_user: float = 200.0):
    """A closed-loop curve of a server capped at k req/s: linear, then flat with latency rising."""
    return lambda users: point(
        users, min(k, per_user * users), p50=int(1e6 * users / min(k, per_user * users))
    )


def search(curve, sat):
    """Drive the plan as the engine does, against a synthetic curve."""
    points: list[dict] = []
    step = (saturation.coarse_loads(sat)[0], "coarse")
    while step is not None:
        points.append({**curve(step[0]), "phase": step[1]})
        step = saturation.next_load(sat, points, capacity.verdicts(points, sat["mode"]))
    return points


def test_capped_server_knee_found_by_coarse_steps_then_zoom():
    points = search(capped(1000), USERS)
    loads = [p["load"] for p in points]
    # 1, 2, 4, 8 (flat: 1000 vs 800 is +25 % for +100 %, good; 16 is flat), then bisection 8…16.
    assert loads[:5] == [1, 2, 4, 8, 16]
    assert [p["phase"] for p in points[5:]] == ["zoom"] * len(points[5:]) and 1 <= len(points[5:]) <= 3
    entry = capacity.arm_capacity("plain", points, USERS)
    assert entry["limited_by"] == "server"
    assert entry["max_rps"] == 1000
    assert entry["knee"]["users"] == 5 or entry["knee"]["rps"] == 1000
    assert [row["fraction"] for row in entry["at_fraction"]] == [0.5, 0.8, 1.0]
    assert entry["at_fraction"][-1]["rps"] == 1000


def test_errors_appearing_limit_the_arm():
    def curve(users):
        return point(users, 150 * users, failures=0 if users < 8 else 20 * users)

    entry = capacity.arm_capacity("plain", search(curve, USERS), USERS)
    assert entry["limited_by"] == "errors"
    assert entry["knee"]["users"] < 8 and entry["max_rps"] == 150 * entry["knee"]["users"]


def test_a_busy_generator_stops_the_search_and_is_named():
    def curve(users):
        return point(users, 2000 * users, cpu=11.0 * users, runq=3.0)

    points = search(curve, USERS)
    assert capacity.verdicts(points, "users")[-1] == "generator"
    assert all(p["phase"] == "coarse" for p in points)  # no zoom beyond a saturated generator
    entry = capacity.arm_capacity("plain", points, USERS)
    assert entry["limited_by"] == "generator"
    needed = entry["generators_needed"]
    # 64 users at 2000 req/s each = 128 000 req/s; 55 µs of generator CPU per request → 12 727 req/s
    # per generator at 70 % of a core → 11 processes.
    assert needed["wanted_rps"] == 128000 and needed["gen_cpu_us_per_request"] == 55.0
    assert needed["processes"] == 11


def test_run_queue_wait_and_loop_lag_count_as_a_busy_generator():
    assert capacity.generator_busy(point(1, 100, cpu=45.0, runq=45.0))
    assert capacity.generator_busy(point(1, 100, cpu=20.0, lag=80.0))
    assert not capacity.generator_busy(point(1, 100, cpu=50.0, runq=10.0))


def test_latency_knee_while_throughput_still_rises():
    def curve(users):
        return point(users, 100 * users * (1 if users < 16 else 0.8), p50=800 if users < 16 else 5000)

    entry = capacity.arm_capacity("plain", search(curve, USERS), USERS)
    assert entry["first_bad"]["verdict"] in ("latency", "flat")
    assert entry["limited_by"] == "server" and entry["knee"]["users"] < 16


def test_rate_mode_shortfall_and_tls_handshakes():
    sat = {**USERS, "mode": "rate", "start": 100.0, "max": 6400.0}

    def curve(rate):
        sent = min(rate, 900.0)
        return point(rate, sent, new=sent, p50=900 if rate <= 900 else 90000)

    entry = capacity.arm_capacity("tls_new", search(curve, sat), sat)
    assert entry["limited_by"] == "server"
    assert 800 <= entry["max_rps"] <= 900
    assert entry["max_handshakes_per_s"] == entry["max_rps"]
    assert "rate" in entry["knee"]


def test_search_reaching_max_without_a_knee_claims_no_limit():
    sat = {**USERS, "max": 8}
    entry = capacity.arm_capacity("plain", search(lambda u: point(u, 100 * u), sat), sat)
    assert entry["limited_by"] is None and entry["max_rps"] == 800


def test_words_only_from_evidence():
    sat = {**USERS, "mode": "rate", "start": 100.0, "max": 6400.0}

    def curve(k):
        return lambda rate: point(rate, min(rate, k), new=min(rate, k))

    stored = {
        "settings": sat,
        "arms": {"plain": search(curve(3000.0), sat), "tls_new": search(curve(300.0), sat)},
    }
    section = capacity.section(stored)
    words = capacity.tls_cost_words(section)
    assert words.startswith("Handshakes cap this server at 300 new TLS connections/s against")
    assert "plain requests/s" in words
    section["plain"]["limited_by"] = "generator"
    assert (
        "No capacity cost of TLS is claimed: for plain, the generator saturated"
        in capacity.tls_cost_words(section)
    )
    assert capacity.tls_cost_words({"plain": section["plain"]}) is None


def test_stage_point_from_an_arm_result():
    hist = new_histogram()
    for value in range(1, 101):
        hist.record_value(value * 100)
    result = {
        "requests": 100,
        "failures": 1,
        "measured_s": 2.0,
        "rps": 50.0,
        "users": 4,
        "arrival_rate": None,
        "connections_opened": 100,
        "tls_sessions_reused": 0,
        "hist": {"ttlb_us": encode(hist)},
        "series": [{"gen_cpu_pct": 10.0, "gen_runq_pct": 1.0, "loop_lag_ms": 0.2}, {"gen_cpu_pct": 30.0}],
    }
    got = capacity.stage_point(result, 4, "coarse", "users")
    assert got["ttlb_p50_us"] == pytest.approx(5000, rel=0.01) and got["ttlb_p99_us"] == pytest.approx(
        9900, rel=0.01
    )
    assert got["gen_cpu_pct"] == 20.0 and got["gen_runq_pct"] == 1.0
    assert got["new_connections_per_s"] == 50.0 and got["error_rate"] == pytest.approx(1 / 101, rel=1e-3)
    assert got["gen_cpu_us_per_request"] == 4000.0


def test_settings_are_checked_and_planned():
    sat = saturation.normalise({"arms": "plain", "max": 10, "stage_s": 1, "warmup_s": 0.5}, ["plain", "tls"])
    assert sat["arms"] == ["plain"] and sat["start"] == 1 and sat["mode"] == "users"
    assert saturation.coarse_loads(sat) == [1, 2, 4, 8, 10]
    assert saturation.max_stages(sat) == 5 + 3
    assert saturation.planned_s(sat) == 8 * 1.5
    assert saturation.planned_requests({**sat, "zoom": 0}, per_user_rps=10) == int(
        (1 + 2 + 4 + 8 + 10) * 10 * 1.5
    )
    assert saturation.normalise(None, ["plain"]) is None
    for bad in (
        {"arms": ["tls_new"]},
        {"mode": "x"},
        {"start": 0},
        {"start": 5, "max": 2},
        {"factor": 1},
        {"zoom": 99},
        {"bogus": 1},
    ):
        with pytest.raises(ValueError, match="saturation"):
            saturation.normalise(bad, ["plain"])


def test_a_server_knee_below_a_later_busy_generator_stays_the_servers():
    points = [point(1, 500), point(2, 900), point(4, 950), {**point(3, 940, cpu=90.0), "phase": "zoom"}]
    entry = capacity.arm_capacity("plain", points, USERS)
    assert [p["verdict"] for p in entry["points"]] == ["good", "good", "generator", "flat"]
    assert entry["limited_by"] == "generator"  # saturated at 3 users, before the flat stage at 4
    later = [point(1, 500), point(2, 900), point(4, 950), point(8, 960, cpu=95.0)]
    assert capacity.arm_capacity("plain", later, USERS)["limited_by"] == "server"


def test_a_stage_cut_short_by_a_cancel_is_not_judged():
    points = [point(1, 500), {**point(2, 100), "complete": False}]
    entry = capacity.arm_capacity("plain", points, USERS)
    assert entry["points"][1]["verdict"] == "cut_short" and entry["limited_by"] is None
    assert entry["max_rps"] == 500
