"""The report as CSV rows: the answer table's rows first (one per answer × field), then one row per
arm × metric × statistic, one per cost statistic (verdict, its direction and words, and interval
method included), one per validity check field. Documented in docs/report-schema.md."""

from __future__ import annotations

import json
from collections.abc import Iterator

from portal.lib.report import report
from portal.lib.stats import verdicts

HEADER = ["run", "arm", "metric", "statistic", "value", "unit", "samples"]
LATENCY_STATISTICS = ("p50", "p90", "p95", "p99", "min", "max", "mean")
COST_UNITS = {"rps": "requests/s", "server_cpu_ms_per_req": "ms"}


def csv_rows(run_id: str, data: dict) -> Iterator[list]:
    yield HEADER
    run = data["run"]
    yield [run_id, "", "run", "status", run["status"], "", ""]
    if run.get("error"):
        yield [run_id, "", "run", "error", run["error"], "", ""]
    for answer in data.get("answers") or []:
        yield from _answer_rows(run_id, answer)
    for name, arm in data["arms"].items():
        yield from _arm_rows(run_id, name, arm)
    for cost in data["costs"]:
        yield from _cost_rows(run_id, cost)
    for check in data["validity"]:
        yield from _check_rows(run_id, check)


def _arm_rows(run_id: str, name: str, arm: dict) -> Iterator[list]:
    for metric in report.LATENCY_METRICS:
        summary = arm.get(metric)
        if summary:
            for statistic in LATENCY_STATISTICS:
                yield [run_id, name, metric, statistic, summary[statistic], "us", summary["count"]]
    requests = arm["requests"]
    yield [run_id, name, "requests", "count", requests, "requests", requests]
    yield [run_id, name, "failures", "count", arm["failures"], "requests", requests]
    yield [run_id, name, "rps", "mean", arm["rps"], "requests/s", requests]
    yield [run_id, name, "duration", "measured", arm["duration_s"], "s", requests]
    # false: a cancel cut the arm short; its figures cover the seconds it ran.
    yield [run_id, name, "complete", "flag", "true" if arm.get("complete", True) else "false", "", requests]
    if arm.get("server_cpu_ms_per_req") is not None:
        yield [run_id, name, "server_cpu", "per_request", arm["server_cpu_ms_per_req"], "ms", requests]


def _answer_rows(run_id: str, answer: dict) -> Iterator[list]:
    """One answer of the table (``portal.lib.report.answers``): its question, value, interval, verdict, server
    CPU and sentence; a field that does not exist is left out (never an empty verdict read as one)."""
    arms = "-".join(answer.get("arms") or [])
    metric = f"answer:{answer['key']}"
    unit = "cores" if answer["metric"] == "cores" else "us"
    samples = answer.get("samples") or {}
    counts = f"{samples['arm']}/{samples['base']}" if samples else ""
    lo, hi = answer.get("ci95") or (None, None)
    cpu = answer.get("server_cpu") or {}
    cpu_lo, cpu_hi = cpu.get("ci95") or (None, None)
    label = "not measured" if answer.get("not_measured") else answer.get("verdict_label") or ""
    for statistic, value, shown_unit in (
        ("question", answer["question"], ""),
        ("value", answer.get("value"), unit),
        ("ci95_lo", lo, unit),
        ("ci95_hi", hi, unit),
        ("verdict", answer.get("verdict"), ""),
        ("verdict_label", label, ""),
        ("server_cpu", cpu.get("value"), "ms"),
        ("server_cpu_ci95_lo", cpu_lo, "ms"),
        ("server_cpu_ci95_hi", cpu_hi, "ms"),
        ("text", answer["text"], ""),
    ):
        if value is not None and value != "":
            yield [run_id, arms, metric, statistic, value, shown_unit, counts]


def _cost_rows(run_id: str, cost: dict) -> Iterator[list]:
    unit = COST_UNITS.get(cost["metric"], "us")
    lo, hi = cost["ci95"] or (None, None)
    pair = f"{cost['arm']}-{cost['base']}"
    metric = f"cost:{cost['name']}:{cost['metric']}"
    for statistic, value in (
        ("delta", cost["delta"]),
        ("ci95_lo", lo),
        ("ci95_hi", hi),
        ("delta_pct", cost["delta_pct"]),
    ):
        shown = "" if value is None else value
        yield [
            run_id,
            pair,
            metric,
            statistic,
            shown,
            "%" if statistic == "delta_pct" else unit,
            cost["samples"]["arm"],
        ]
    samples = f"{cost['samples']['arm']}/{cost['samples']['base']}"
    yield [run_id, pair, metric, "ci_method", cost.get("ci_method") or "none", "", samples]
    yield [run_id, pair, metric, "verdict", cost.get("verdict") or "", "", samples]
    # Derived when absent: a frozen report signed before the direction was kept.
    said = verdicts.verdict_words(cost)
    yield [run_id, pair, metric, "direction", said["direction"] or "", "", samples]
    yield [run_id, pair, metric, "verdict_label", said["label"], "", samples]
    if said["label"] == "unconfirmed":  # no verdict without an interval: why
        yield [run_id, pair, metric, "unconfirmed", said["title"], "", samples]


def _check_rows(run_id: str, check: dict) -> Iterator[list]:
    """A validity check: its status (pass, warn, fail or skip), its sentence and its evidence (JSON)."""
    metric = f"check:{check['check']}"
    yield [run_id, "", metric, "status", check["status"], "", ""]
    yield [run_id, "", metric, "detail", check.get("detail") or "", "", ""]
    evidence = check.get("evidence")
    if evidence:
        yield [run_id, "", metric, "evidence", json.dumps(evidence, sort_keys=True, default=str), "json", ""]
