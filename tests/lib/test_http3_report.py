"""HTTP/3 in the report (issue 34, items 2 and 4): its six costs with intervals and verdicts, their
answer rows (JSON ``answers``, CSV), and the ``http3`` check voiding only the costs of the arm it
finds a problem on (loss, a version or Retry change, 0-RTT refused, streams reset, ALPN, the
generator's saturation), with like-for-like content by ``same_content``. Pure: no database."""

from __future__ import annotations

import pytest

from portal.lib.report import report
from portal.lib.validity import http3
from portal.runs.exports import csv_rows
from tests.lib.test_evidence import row

H3_COSTS = [
    "h3_vs_h2",
    "h3_vs_tls",
    "h3_new_vs_h2_new",
    "h3_new_vs_tls_new",
    "h3_resumption_saving",
    "h3_0rtt_saving",
]
# Median TTLB per arm (µs): QUIC's new connection is one round trip shorter than TCP + TLS 1.3's two.
P50 = {"tls": 500, "h2": 520, "tls_new": 3000, "h2_new": 3050, "h3": 600, "h3_new": 2000}
P50 |= {"h3_resumed": 1700, "h3_0rtt": 1200}


def quic(name: str, **changes) -> dict:
    """An arm's ``quic`` as the engine's contract has it (docs/engine-protocol.md, "HTTP/3")."""
    new = name != "h3"
    facts = {
        "port": 8443,
        "discovered_by": "url",
        "alt_svc": 'h3=":8443"; ma=2592000',
        "connections": 300 if new else 0,
        "versions": {"1": 300} if new else {},
        "alpn": {"h3": 300} if new else {},
        "groups": {"X25519MLKEM768": 300} if new else {},
        "ciphers": {"TLS_AES_128_GCM_SHA256": 300} if new else {},
        "resumed": 300 if name in ("h3_resumed", "h3_0rtt") else 0,
        "retry": 0,
        "version_negotiation": 0,
        "early_data": {"accepted": 300 if name == "h3_0rtt" else 0, "refused": 0, "no_ticket": 0},
        "datagrams_sent": 3000,
        "datagrams_received": 3300,
        "bytes_sent": 900_000,
        "bytes_received": 1_500_000,
        "packets_lost": 3,
        "pto_count": 1,
        "first_flight_bytes_max": 1252 if new else 0,
        "first_flight_datagrams_max": 1 if new else 0,
        "handshake_bytes_sent": 300 * 1400,
        "handshake_bytes_received": 300 * 3000,
        "streams_reset": 0,
        "closed_by_server": {},
    }
    return facts | changes


def series(p50: int, n: int = 8) -> list[dict]:
    return [
        {
            "second": i,
            "requests": 30,
            "failures": 0,
            "p50_us": p50 + i % 3,
            "p95_us": 2 * p50,
            "ttfb_p50_us": p50 // 2,
        }
        for i in range(n)
    ]


def h3_rows(**quic_changes) -> list[dict]:
    """Stored rows of a run ``tls, h2, tls_new, h2_new, h3, h3_new, h3_resumed, h3_0rtt``; the
    keyword ``<arm>={...}`` changes that arm's ``quic``, ``<arm>_row={...}`` its row."""
    rows = []
    for name, p50 in P50.items():
        extra = {"series": series(p50), "connections_reopened": 0}
        if name.startswith("h3"):
            new = name != "h3"
            reused = 300 if name in ("h3_resumed", "h3_0rtt") else 0
            extra |= {"quic": quic(name, **quic_changes.get(name, {})), "tls_sessions_reused": reused}
            extra["connections_opened"] = 300 if new else 2
        extra |= quic_changes.get(f"{name}_row", {})
        rows.append(row(name, [p50] * 300, **extra))
    return rows


def build(rows: list[dict]) -> dict:
    config = {"arms": [{"name": r["arm"], "url": r["url"]} for r in rows]}
    return report.build_report({"id": "x", "status": "succeeded", "config": config}, rows)


def by_key(data: dict) -> dict[str, dict]:
    return {a["key"]: a for a in data["answers"]}


def test_the_six_http3_costs_have_values_intervals_and_verdicts_in_the_answer_table():
    data = build(h3_rows())
    answers = by_key(data)
    for name in H3_COSTS:
        assert answers[name]["ci95"] and answers[name]["verdict"], (name, answers[name])
    new = answers["h3_new_vs_tls_new"]
    assert new["value"] == pytest.approx(-1000, abs=3) and new["arms"] == ["h3_new", "tls_new"]
    assert new["verdict_label"] == "significant saving" and new["question"].startswith("HTTP/3 instead")
    h2, zero = answers["h3_vs_h2"], answers["h3_0rtt_saving"]
    assert h2["verdict_label"] == "noticeable" and h2["value"] == pytest.approx(80, abs=3)
    assert zero["value"] == pytest.approx(500, abs=3) and zero["tone"] == "saving"
    assert answers["h3_resumption_saving"]["value"] == pytest.approx(300, abs=3)
    # HTTP/3's rows follow the HTTP/2 ones, in declared order.
    keys = [a["key"] for a in data["answers"] if a["kind"] == "cost"]
    assert keys[-6:] == ["h3_vs_h2", "h3_vs_tls", "h3_new_vs_h2_new", "h3_new_vs_tls_new", *H3_COSTS[-2:]]
    assert "0-RTT saves 0.50 ms per resumed QUIC connection" in data["headline"]
    said = "HTTP/3 per new connection against HTTP/1.1 over TLS (h3_new vs tls_new) saves 1.00 ms median"
    assert (
        said in data["headline"] and "QUIC session resumption saves 0.30 ms per new QUIC" in data["headline"]
    )
    check = next(c for c in data["validity"] if c["check"] == "http3")
    assert check["status"] == "pass" and check["evidence"]["h3_new"]["loss_pct"] == 0.1
    # Without a second of generator load recorded the pass does not claim the generator kept up.
    assert "the generator's load was not recorded (not judged)" in check["detail"]
    loaded = [r | {"series": [p | {"gen_cpu_pct": 30.0} for p in r["series"]]} for r in h3_rows()]
    detail = next(c for c in build(loaded)["validity"] if c["check"] == "http3")["detail"]
    assert detail.endswith("the generator kept up.")
    csv_text = "\n".join(",".join(map(str, line)) for line in csv_rows("x", data))
    assert "What 0-RTT saves on a resumed HTTP/3 connection" in csv_text


def test_0rtt_refused_voids_only_the_0rtt_cost_and_says_so():
    data = build(h3_rows(h3_0rtt={"early_data": {"accepted": 280, "refused": 20, "no_ticket": 0}}))
    answers = by_key(data)
    voided = answers["h3_0rtt_saving"]
    assert (
        voided["verdict"] is None
        and "0-RTT not accepted on 20 of 300 connections (20 refused)" in (voided["not_judged"])
    )
    assert answers["h3_resumption_saving"]["verdict"] and answers["h3_new_vs_tls_new"]["verdict"]
    none_accepted = build(h3_rows(h3_0rtt={"early_data": {"accepted": 0, "refused": 0, "no_ticket": 0}}))
    assert "accepted no 0-RTT early data" in by_key(none_accepted)["h3_0rtt_saving"]["not_judged"]


@pytest.mark.parametrize(
    ("changes", "words", "status"),
    [
        ({"packets_lost": 60}, "60 packets lost of 3,000 datagrams sent (2.0%, above 1%", "fail"),
        (
            {"versions": {"1": 200, "2": 100}},
            "the QUIC version changed during the run (1 ×200, 2 ×100",
            "fail",
        ),
        ({"retry": 40}, "40 of 300 connections got a Retry, the others not", "fail"),
        ({"retry": 300}, "every connection (300) got a Retry", "warn"),
        ({"streams_reset": 7}, "7 of 300 streams reset by the server", "fail"),
        ({"alpn": {"h3": 290, "h3-29": 10}}, "connections negotiated h3-29 ×10, not h3", "fail"),
    ],
)
def test_a_problem_on_h3_new_voids_only_the_costs_of_h3_new(changes, words, status):
    data = build(h3_rows(h3_new=changes))
    check = next(c for c in data["validity"] if c["check"] == "http3")
    assert check["status"] == status and check["arms"] == ["h3_new"]
    assert words in check["findings"][0]["reason"]
    answers = by_key(data)
    touched = ("h3_new_vs_h2_new", "h3_new_vs_tls_new", "h3_resumption_saving")
    for name in touched:
        if status == "fail":
            assert answers[name]["verdict"] is None and words in answers[name]["not_judged"]
        else:
            assert answers[name]["verdict"] and answers[name]["not_judged"] is None
    for name in ("h3_vs_h2", "h3_vs_tls", "h3_0rtt_saving"):
        assert answers[name]["verdict"] and answers[name]["not_judged"] is None


def test_a_saturated_generator_on_an_http3_arm_voids_its_costs_not_the_others():
    hot = [p | {"gen_cpu_pct": 97.0, "loop_lag_ms": 2.0} for p in series(P50["h3"])]
    data = build(h3_rows(h3_row={"series": hot}))
    check = next(c for c in data["validity"] if c["check"] == "http3")
    assert (
        check["status"] == "fail" and "generator was saturated (generator CPU demand 97%" in check["detail"]
    )
    answers = by_key(data)
    assert answers["h3_vs_h2"]["verdict"] is None and answers["h3_vs_tls"]["verdict"] is None
    assert answers["h3_new_vs_tls_new"]["verdict"]


def test_different_content_on_h3_against_h2_voids_that_pair_only():
    data = build(h3_rows(h3_row={"sizes_by_url": {"/1k": [2048]}}))
    same = next(c for c in data["validity"] if c["check"] == "same_content")
    assert same["status"] == "fail" and ["h3", "h2"] in [f["arms"] for f in same["findings"]]
    answers = by_key(data)
    assert answers["h3_vs_h2"]["verdict"] is None and "h3 vs h2" in answers["h3_vs_h2"]["not_judged"]
    assert answers["h3_new_vs_h2_new"]["verdict"]


def test_a_resumed_arm_that_did_not_resume_and_a_new_one_that_did_fail_tls_sessions():
    data = build(h3_rows(h3_resumed_row={"tls_sessions_reused": 0}, h3_new_row={"tls_sessions_reused": 5}))
    sessions = next(c for c in data["validity"] if c["check"] == "tls_sessions")
    assert sessions["status"] == "fail" and set(sessions["arms"]) == {"h3_new", "h3_resumed"}


def test_without_quic_facts_the_check_says_skip_and_without_http3_arms_it_is_absent():
    rows = h3_rows()
    for r in rows:
        r.pop("quic", None)
    check = next(c for c in build(rows)["validity"] if c["check"] == "http3")
    assert check["status"] == "skip" and "no HTTP/3 arm recorded its QUIC facts" in check["detail"]
    assert http3.check_http3({"tls": {"requests": 1}}) is None
