"""The answer table (portal.lib.report.answers): a row per question, no verdict
without an interval, questions declared once (HTTP/3's by declaring them), the run that answered
nothing, and the cores at peak with their interval. Pure: no database."""

from __future__ import annotations

import pytest

from portal.lib.report import answers, budgets, evidence, report
from portal.lib.stats import costs, projection
from tests.lib.test_costs import arm, seconds
from tests.lib.test_evidence import row

FIVE_ARMS = [{"name": n, "url": "u"} for n in ("plain", "tls", "plain_new", "tls_new", "tls_resumed")]


def judged(arms: dict) -> list[dict]:
    return evidence.judge_costs(costs.compute_costs(arms), [], {})


def rows_for(config: dict, arms: dict, missing: dict | None = None, **more) -> list[dict]:
    return answers.answer_rows(config, judged(arms), [], None, missing or {}, arms, **more)


def test_a_row_per_question_in_declared_order_with_value_interval_and_verdict():
    arms = {
        name: arm(ttlb=(p50, 2 * p50), series=seconds([p50 + i % 3 for i in range(8)]))
        for name, p50 in (
            ("plain", 400),
            ("tls", 440),
            ("plain_new", 900),
            ("tls_new", 3000),
            ("tls_resumed", 1500),
        )
    }
    rows = rows_for({"arms": FIVE_ARMS}, arms)
    assert [r["key"] for r in rows] == [
        "keepalive_tls",
        "new_connection_tls",
        "handshake",
        "resumption_saving",
    ]
    keepalive = rows[0]
    assert keepalive["question"] == "TLS on warm (keep-alive) connections"
    assert (keepalive["value"], keepalive["value_pct"], keepalive["verdict"]) == (40, 10.0, "noticeable")
    assert keepalive["ci95"] and keepalive["unconfirmed"] is None
    assert keepalive["shown"] == {
        "answer": "+0.04 ms (+10%)",
        "interval": keepalive["shown"]["interval"],
        "verdict": "noticeable",
        "cpu": "—",
    }
    assert keepalive["shown"]["interval"].endswith(" ms") and " … " in keepalive["shown"]["interval"]
    assert keepalive["text"].startswith("TLS on warm (keep-alive) connections: +0.04 ms (+10%), 95% CI ")
    assert keepalive["text"].endswith("— noticeable")
    assert rows[3]["verdict_label"] == "significant saving"  # resumption saves 1.5 ms


def test_no_verdict_without_an_interval_anywhere():
    arms = {"plain": arm(ttlb=(400, 800)), "tls": arm(ttlb=(800, 1600))}  # +100%, no series, no rounds
    (keepalive,) = rows_for({"arms": FIVE_ARMS[:2]}, arms)
    assert keepalive["verdict"] is None and keepalive["verdict_label"] == "unconfirmed"
    assert keepalive["unconfirmed"] == costs.UNCONFIRMED
    assert keepalive["shown"]["interval"] == "—" and "significant" not in keepalive["text"]
    assert keepalive["text"] == (
        "TLS on warm (keep-alive) connections: +0.40 ms (+100%) — unconfirmed: too few seconds/rounds for "
        "an interval — measure ≥ 5 s per arm or 3 rounds"
    )
    # The same cost in the report: its budget can neither pass nor fail.
    data = report.build_report(
        {"id": "r", "status": "succeeded", "config": {"arms": FIVE_ARMS[:2]}},
        [
            row("plain", [400] * 300),
            row("tls", [800] * 300),
        ],
    )
    verdicts = budgets.evaluate(data, {"keepalive_tls_p50_ms": 0.1, "keepalive_tls_p95_ms": 100})
    assert [r["status"] for r in verdicts["results"]] == ["skip", "skip"] and verdicts["status"] == "skip"
    assert verdicts["results"][0]["detail"].startswith("could not judge: unconfirmed: too few seconds")
    assert verdicts["results"][0]["value"] == 0.4  # the measured value stays


def test_an_asked_question_whose_arm_was_refused_says_so_and_the_run_answered_nothing():
    arms = {"tls": arm(ttlb=(500, 900)), "tls_new": arm(ttlb=(3000, 6000))}
    config = {"arms": [{"name": n, "url": "u"} for n in ("plain", "tls", "tls_new")]}
    refused = [{"arm": "plain", "url": "http://h:8443/", "reason": "plain refused: port 8443 speaks TLS"}]
    missing = answers.missing_arms(
        config, {"tls": {"ttlb_us": {"count": 3}}, "tls_new": {"ttlb_us": {"count": 3}}}, refused, {}
    )
    assert missing == {"plain": ("refused", "port 8443 speaks TLS")}
    rows = rows_for(config, arms, missing)
    assert [(r["key"], r["not_measured"]) for r in rows] == [
        ("keepalive_tls", "plain arm refused"),
        ("new_connection_tls", "plain arm refused"),
    ]
    assert rows[0]["why_not"] == "plain arm refused: port 8443 speaks TLS"
    assert (
        rows[0]["text"]
        == "TLS on warm (keep-alive) connections: not measured — plain arm refused: port 8443 speaks TLS"
    )
    assert answers.unanswered(rows) == "no cost could be computed — plain arm refused: port 8443 speaks TLS"
    # One question answered is an answer; none asked (a single arm) is no incompleteness either.
    arms["plain"] = arm()
    assert answers.unanswered(rows_for(config, arms)) is None
    assert answers.unanswered(rows_for({"arms": [{"name": "tls", "url": "u"}]}, {"tls": arm()})) is None


def test_invalid_arms_leave_the_run_unanswered_but_a_failed_check_does_not():
    voided = answers.row("keepalive_tls", "cost", "q", not_judged="plain is invalid: 404 × 300")
    failed_check = answers.row("handshake", "cost", "q", not_judged="drifted (drift)")
    assert answers.unanswered([voided]) == "no cost could be computed — plain is invalid: 404 × 300"
    assert answers.unanswered([voided, failed_check]) is None


def test_http3_questions_are_declared_so_a_cost_of_that_name_gets_its_row():
    declared = {q.cost for q in answers.QUESTIONS}
    assert {"h3_vs_h2", "h3_vs_tls", "h3_new_vs_h2_new", "h3_new_vs_tls_new", "h3_0rtt_saving"} <= declared
    h3 = {
        "name": "h3_new_vs_tls_new", "arm": "h3_new", "base": "tls_new", "metric": "ttlb_p50_us",
        "delta": -800, "delta_pct": -20.0, "ci95": [-900, -700], "ci_method": "rounds",
        "samples": {"arm": 3, "base": 3}, "verdict": "noticeable", "not_judged": None,
    }  # fmt: skip
    (found,) = answers.cost_rows({"arms": []}, [h3], {}, (None, None))
    assert found["question"] == "HTTP/3 instead of HTTP/1.1 on a new connection"
    # Either way is a finding for a protocol comparison: a saving, never "check the setup".
    assert found["verdict_label"] == "noticeable saving" and found["shown"]["answer"] == "-0.80 ms (-20%)"


def test_cpu_per_request_from_the_sampled_local_process_with_its_interval_over_rounds():
    def with_rounds(p50: int, cpu: float) -> dict:
        rounds = [
            {"round": i, "ttlb_p50_us": p50, "generator_probe_cpu_ms_per_req": cpu + 0.01 * i}
            for i in range(3)
        ]
        return arm(ttlb=(p50, 2 * p50), rounds=rounds)

    arms = {"plain": with_rounds(400, 0.05), "tls": with_rounds(450, 0.08)}
    probes = {"generator_cpu": {"plain": {"cpu_ms_per_req": 0.06}, "tls": {"cpu_ms_per_req": 0.09}}}
    (keepalive,) = rows_for({"arms": FIVE_ARMS[:2]}, arms, probes=probes)
    cpu = keepalive["server_cpu"]
    assert cpu["source"] == "local_process" and cpu["value"] == pytest.approx(0.03)
    assert cpu["ci95"] == [pytest.approx(0.03), pytest.approx(0.03)]  # the same step every round
    assert keepalive["shown"]["cpu"] == "+0.03 ms (+0.03 … +0.03)"


def test_cores_at_peak_with_a_conservative_interval():
    proj = {
        "keepalive_ms_per_req": 0.01,
        "new_ms_per_req": 0.6,
        "new_base": "plain_new",
        "source": "server_probe",
        "keepalive_ci95": [0.005, 0.02],
        "new_ci95": [0.5, 0.7],
    }
    cores = answers.cores_row(proj)
    # 1,000 req/s × (0.9 × 0.01 + 0.1 × 0.6) / 1000 = 0.069 cores.
    assert cores["value"] == pytest.approx(0.069) and cores["shown"]["answer"] == "+0.07 cores"
    assert cores["ci95"] == [pytest.approx(0.0545), pytest.approx(0.088)]
    assert cores["verdict_label"] == "projection" and cores["unconfirmed"] is None
    assert projection.cores_interval(proj, 2000, 0.5) == [pytest.approx(0.505), pytest.approx(0.72)]
    unsure = answers.cores_row({**proj, "keepalive_ci95": None})
    assert unsure["ci95"] is None and unsure["verdict_label"] == "unconfirmed"


def test_a_matrix_pair_reads_as_the_cheaper_instead_of_the_dearer_and_the_hybrid_as_its_price():
    hybrid = {
        "arms": ["tls_new@mlkem", "tls_new@x25519"], "group": "X25519MLKEM768", "versus": "x25519",
        "ttlb_us": 150, "ttlb_ci95": None, "ttlb_ci_method": "none", "server_cpu_ms": 0.12,
        "server_cpu_ci95": [0.1, 0.14], "cpu_source": "server_probe", "client_bytes": 1184,
        "server_bytes": 1072, "samples": {"arm": 1, "base": 1},
    }  # fmt: skip
    advice = [
        {"dimension": "cert", "arms": ["tls_new@rsa", "tls_new@ecdsa"], "saving_us": 300, "saving_pct": 8.0,
         "ci95": [200, 400], "ci_method": "rounds", "verdict": "noticeable"},
        {"dimension": "group", "arms": ["tls_new@mlkem", "tls_new@x25519"], "saving_us": 150,
         "saving_pct": 4.0, "ci95": None, "ci_method": "none", "verdict": None, "hybrid": hybrid},
    ]  # fmt: skip
    entries = [
        {"arm": "tls_new@rsa", "variant": {"cert_key_type": "rsa"}},
        {"arm": "tls_new@ecdsa", "variant": {"cert_key_type": "ecdsa"}},
        {"arm": "tls_new@mlkem", "variant": {"group": "x25519mlkem768"}},
        {"arm": "tls_new@x25519", "variant": {"group": "x25519"}},
    ]
    cert, hybrid = answers.matrix_rows(advice, entries, (None, None))
    assert cert["question"] == "Certificate: ECDSA instead of RSA, per new connection"
    assert (cert["value"], cert["ci95"], cert["verdict_label"]) == (-300, [-400, -200], "noticeable saving")
    assert hybrid["question"] == "Post-quantum X25519MLKEM768 instead of X25519, per new connection"
    assert hybrid["shown"]["answer"] == "+0.15 ms (+4%), +2,256 bytes"
    assert hybrid["verdict_label"] == "unconfirmed"  # its time has no interval (one round)
    assert hybrid["shown"]["cpu"] == "+0.12 ms (+0.1 … +0.14)" and hybrid["server_cpu"]["per"] == "handshake"


@pytest.mark.parametrize(
    ("value", "text"),
    [(2.241767, "2.24"), (0.0312345, "0.0312"), (0.6, "0.6"), (0, "0"), (0.00004, "4.0e-05"), (None, "—")],
)
def test_cpu_figures_have_three_significant_digits(value, text):
    assert answers.cpu_text(value, signed=False) == text
