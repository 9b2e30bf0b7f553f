"""Regression judgement of a run against its target's pinned baseline, by pure functions over two
reports (``tollgate.report/1``).

Each cost of the median time to last byte (``ttlb_p50_us``: ``handshake``, ``keepalive_tls``, …)
that both reports have is judged with the interval method of compare (``portal.lib.report.compare``): the
two 95% intervals must not overlap, and the gap between them must exceed the scenario's tolerance,
``tolerance_pct`` of the baseline's cost (at least 1 µs, so a zero baseline still needs a real gap):

- ``regression``: the run's interval lies above the baseline's (run low − baseline high > tolerance);
- ``improvement``: below it (baseline low − run high > tolerance);
- ``unchanged``: the intervals overlap or the gap is within the tolerance;
- ``unknown``: either side has no interval, or either cost was not judged (an invalid arm, a failed
  check) — no claim either way.

``resumption_saving`` reads the other way round (``tls_new − tls_resumed``: what resumption
saves), so a saving that shrank is its regression. The run's judgement is ``regression`` when any
cost regressed, else ``improvement`` when any improved, else ``unchanged`` when any cost could be
judged, else ``unknown``.

What changed (``what_changed``) is compare's setup differences between the baseline and the run —
certificate, chain, protocol, cipher, group, resumption, server software (the target's ``Server``
header), TLS library, generator host and versions, scenario version, load — each with its value
before and after, named in words.
"""

from __future__ import annotations

from portal.lib.report import compare
from portal.lib.report.headline import COST_WORDS

METRIC = "ttlb_p50_us"
# Costs whose natural direction is a saving: larger is better.
SAVINGS = {"resumption_saving", "h3_resumption_saving", "h3_0rtt_saving"}
DEFAULT_TOLERANCE_PCT = 10.0
# A scenario's tolerance, as every surface checks it (the scenario page, the CLI, the API).
MAX_TOLERANCE_PCT = 1000.0
TOLERANCE_ERROR = "Expected a number of percent from 0 to 1000."
MIN_TOLERANCE_US = 1.0
ORDER = ("regression", "improvement", "unchanged", "unknown")
# Setup keys of compare, in words; keys not listed here are not among the explanations.
CHANGE_LABELS = {
    "cert_key": "certificate key",
    "cert_chain_length": "certificate chain length",
    "cert_chain_bytes": "certificate chain bytes",
    "tls_protocol": "TLS protocol",
    "tls_cipher": "cipher",
    "tls_group": "key exchange group",
    "tls_resumption": "session resumption",
    "server_software": "server software",
    "tls_library": "generator TLS library",
    "openssl": "generator OpenSSL",
    "generator_host": "generator host",
    "generator_cpu": "generator CPU",
    "locust": "Locust version",
    "tollgate": "Tollgate version",
    "scenario_version": "scenario version",
    "arms": "arms",
    "users": "users",
    "arrival_rate": "arrival rate (requests/s)",
    "think_time_s": "think time (s)",
    "duration_s": "duration per arm (s)",
    "warmup_s": "warm-up (s)",
    "rounds": "rounds",
    "paths": "paths",
    "plain_url": "plain URL",
    "tls_url": "TLS URL",
    "verify_tls": "verify TLS",
}


def _cost(report: dict, name: str) -> dict | None:
    return next((c for c in report.get("costs", []) if c["name"] == name and c["metric"] == METRIC), None)


def judge_cost(run_cost: dict, base_cost: dict, tolerance_pct: float) -> dict:
    """One cost's judgement: ``{"name", "metric", "run", "baseline", "change_us", "change_pct",
    "gap_us", "tolerance_us", "judgement"}``; ``run``/``baseline`` are ``{"delta", "ci95"}``."""
    change = run_cost["delta"] - base_cost["delta"]
    tolerance = max(MIN_TOLERANCE_US, abs(base_cost["delta"]) * tolerance_pct / 100.0)
    out = {
        "name": run_cost["name"],
        "metric": METRIC,
        "run": {"delta": run_cost["delta"], "ci95": run_cost.get("ci95")},
        "baseline": {"delta": base_cost["delta"], "ci95": base_cost.get("ci95")},
        "change_us": round(change, 3),
        "change_pct": round(100.0 * change / base_cost["delta"], 1) if base_cost["delta"] else None,
        "gap_us": None,
        "tolerance_us": round(tolerance, 3),
        "judgement": "unknown",
    }
    ci, base_ci = run_cost.get("ci95"), base_cost.get("ci95")
    if not ci or not base_ci or run_cost.get("not_judged") or base_cost.get("not_judged"):
        return out
    above, below = ci[0] - base_ci[1], base_ci[0] - ci[1]
    out["gap_us"] = round(max(above, below), 3)
    if compare.significance(ci, base_ci) == "not significant" or max(above, below) <= tolerance:
        out["judgement"] = "unchanged"
    else:
        worse = above > 0 if run_cost["name"] not in SAVINGS else below > 0
        out["judgement"] = "regression" if worse else "improvement"
    return out


def what_changed(run_report: dict, baseline_report: dict) -> list[dict]:
    """The setup differences that can explain a change: ``[{"key", "label", "before", "after"}]``,
    from compare's setup keys (the baseline is before)."""
    differing, _ = compare.setup_differences([baseline_report, run_report])
    return [
        {"key": d["key"], "label": CHANGE_LABELS[d["key"]], "before": d["values"][0], "after": d["values"][1]}
        for d in differing
        if d["key"] in CHANGE_LABELS
    ]


def judge(run_report: dict, baseline_report: dict, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> dict:
    """``{"status", "baseline", "tolerance_pct", "costs": [judge_cost …], "changes": what_changed}``."""
    costs = []
    for cost in run_report.get("costs", []):
        if cost["metric"] != METRIC:
            continue
        base = _cost(baseline_report, cost["name"])
        if base is not None:
            costs.append(judge_cost(cost, base, tolerance_pct))
    found = {c["judgement"] for c in costs}
    status = next((s for s in ORDER if s in found), "unknown")
    return {
        "status": status,
        "baseline": baseline_report["run"]["id"],
        "tolerance_pct": tolerance_pct,
        "costs": costs,
        "changes": what_changed(run_report, baseline_report),
    }


def describe_cost(cost: dict) -> str:
    """One sentence for an alert, the cost named in words (the report's headline's): "A full TLS
    handshake per request rose by +1.90 ms, +85.2%: 4.13 ms (95% CI 4.01–4.30 ms) against the
    baseline's 2.23 ms (95% CI 2.15–2.31 ms)"."""
    verb = {"regression": "worsened", "improvement": "improved"}.get(cost["judgement"], "changed")
    if cost["name"] not in SAVINGS:
        verb = "rose" if cost["change_us"] > 0 else "fell"
    pct = f", {cost['change_pct']:+.1f}%" if cost["change_pct"] is not None else ""
    return (
        f"{cost_words(cost['name'])} {verb} by {cost['change_us'] / 1000:+.2f} ms{pct}: "
        f"{_ms(cost['run'])} against the baseline's {_ms(cost['baseline'])}"
    )


def cost_words(name: str) -> str:
    """A cost's name as the report says it ("keepalive_tls": "TLS on warm (keep-alive) connections"),
    first letter raised; a name without words keeps its own, underscores as spaces."""
    words = COST_WORDS.get(name, name.replace("_", " "))
    return words[:1].upper() + words[1:]


def _ms(side: dict) -> str:
    ci = side.get("ci95")
    interval = f" (95% CI {ci[0] / 1000:.2f}–{ci[1] / 1000:.2f} ms)" if ci else " (no interval)"
    return f"{side['delta'] / 1000:.2f} ms{interval}"


def describe_change(change: dict) -> str:
    """ "certificate key: EC 256 → RSA 4096"."""
    return f"{change['label']}: {_value(change['before'])} → {_value(change['after'])}"


def _value(value) -> str:
    return "—" if value is None or value == "" else str(value)
