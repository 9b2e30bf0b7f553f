"""Budgets: limits a CI pipeline sets on a run's TLS costs, judged from the report JSON.

A budget is ``NAME=VALUE`` (the CLI's ``--budget``) or ``{NAME: VALUE}`` (a scenario, the API); the
run keeps its budgets in ``run.config["budgets"]`` and its report carries the verdicts under
``"budgets"`` (``evaluate``). Pure functions over the report (``portal.lib.report.report``), documented in
docs/budgets.md.

A budget passes when the measured figure is at most its limit, fails when above it, and is
``skip`` — never ``pass`` — when the figure was not measured (the arms it needs did not run, no probe
sampled the CPU), its cost was not judged (a validity check failed on its arms, an arm is
invalid) or it is unconfirmed (no interval: too few seconds or rounds): a number the report itself
does not vouch for can neither clear nor break a budget — the budget says it could not judge.
Overall: ``fail`` when any budget fails, else ``skip`` when any was skipped, else ``pass``.

A negative figure (TLS faster than plain) is below any limit and passes; when its cost's verdict says
so (``portal.lib.stats.verdicts.verdict_words``: "tls faster than plain — check the setup") the detail says it
too, so it never reads as what TLS costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from portal.lib.stats.costs import UNCONFIRMED
from portal.lib.stats.verdicts import verdict_words

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class Budget:
    name: str
    unit: str
    what: str
    integer: bool = False


BUDGETS = {
    b.name: b
    for b in (
        Budget(
            "keepalive_tls_p50_ms",
            "ms",
            "TTLB p50 of tls minus plain (keep-alive connections): the keepalive_tls cost",
        ),
        Budget(
            "keepalive_tls_p95_ms",
            "ms",
            "TTLB p95 of tls minus plain (keep-alive connections): the keepalive_tls cost",
        ),
        Budget(
            "handshake_ms",
            "ms",
            "TTLB p50 of tls_new minus plain_new: a full TLS handshake per request (the handshake "
            "cost; needs the plain_new and tls_new arms)",
        ),
        Budget(
            "server_cpu_ms_per_req",
            "ms",
            "server CPU-ms per request of tls minus plain, from the SSH server probe (else the local "
            "process probe); needs a probe that sampled both arms",
        ),
        Budget(
            "h3_vs_h2_p50_ms",
            "ms",
            "TTLB p50 of h3 minus h2 (warm connections): what HTTP/3 costs over HTTP/2 (the h3_vs_h2 "
            "cost; needs the h3 and h2 arms; negative when HTTP/3 is quicker)",
        ),
        Budget(
            "h3_new_vs_h2_new_p50_ms",
            "ms",
            "TTLB p50 of h3_new minus h2_new: a new QUIC connection per request against a new TCP + TLS "
            "one (the h3_new_vs_h2_new cost; needs the h3_new and h2_new arms)",
        ),
        Budget(
            "failed_checks",
            "checks",
            "number of validity checks that failed (0: no failed validity check)",
            integer=True,
        ),
    )
}
NAMES = tuple(BUDGETS)
# Keep-alive and handshake budgets: (cost name, metric) of the report's ``costs``.
COST_OF = {
    "keepalive_tls_p50_ms": ("keepalive_tls", "ttlb_p50_us"),
    "keepalive_tls_p95_ms": ("keepalive_tls", "ttlb_p95_us"),
    "handshake_ms": ("handshake", "ttlb_p50_us"),
    "server_cpu_ms_per_req": ("keepalive_tls", "server_cpu_ms_per_req"),
    "h3_vs_h2_p50_ms": ("h3_vs_h2", "ttlb_p50_us"),
    "h3_new_vs_h2_new_p50_ms": ("h3_new_vs_h2_new", "ttlb_p50_us"),
}
ARMS_OF = {
    "keepalive_tls": ("tls", "plain"),
    "handshake": ("tls_new", "plain_new"),
    "h3_vs_h2": ("h3", "h2"),
    "h3_new_vs_h2_new": ("h3_new", "h2_new"),
}
MAX_LIMIT = 1e9


class BudgetError(ValueError):
    """Bad budgets: ``errors`` lists one message per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def _limit(name: str, value) -> float | int:
    """A limit as a number (a string from the command line or a form is converted), or ValueError."""
    budget = BUDGETS[name]
    if isinstance(value, bool):
        raise ValueError(f"{name}: a number, not {str(value).lower()}")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {value!r} is not a number ({budget.unit})") from None
    if not math.isfinite(number) or number < 0 or number > MAX_LIMIT:
        raise ValueError(f"{name}: the limit must be a finite number ≥ 0, not {value}")
    if budget.integer:
        if number != int(number):
            raise ValueError(f"{name}: a whole number of checks, not {value}")
        return int(number)
    return number


def clean(budgets) -> dict:
    """``{name: limit}`` checked (known names, numbers ≥ 0); raises ``BudgetError``."""
    if budgets is None:
        return {}
    if not isinstance(budgets, dict):
        raise BudgetError([f'Expected an object {{"name": limit}}; names: {", ".join(NAMES)}.'])
    out, errors = {}, []
    for name, value in budgets.items():
        if name not in BUDGETS:
            errors.append(f"unknown budget {name!r}; known: {', '.join(NAMES)}")
            continue
        try:
            out[name] = _limit(name, value)
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        raise BudgetError(errors)
    return out


def parse(items: list[str]) -> dict:
    """``["handshake_ms=2", "failed_checks=0"]`` → ``{"handshake_ms": 2.0, "failed_checks": 0}``;
    raises ``BudgetError`` naming each bad item (no ``=``, unknown name, not a number, given twice)."""
    raw, errors = {}, []
    for item in items:
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            errors.append(f"{item!r}: expected NAME=VALUE, e.g. handshake_ms=2")
        elif name in raw:
            errors.append(f"{name}: given twice")
        else:
            raw[name] = value
    try:
        budgets = clean(raw)
    except BudgetError as exc:
        errors += exc.errors
        budgets = {}
    if errors:
        raise BudgetError(errors)
    return budgets


def _result(name: str, limit, value, status: str, detail: str) -> dict:
    return {
        "name": name,
        "limit": limit,
        "value": value,
        "unit": BUDGETS[name].unit,
        "status": status,
        "detail": detail,
    }


def _cost(report: dict, name: str, metric: str) -> dict | None:
    for cost in report.get("costs") or []:
        if cost.get("name") == name and cost.get("metric") == metric:
            return cost
    return None


def _local_cpu(report: dict) -> tuple[float, str] | None:
    """tls − plain CPU-ms per request of the process the generator host sampled (the local probe)."""
    cpu = ((report.get("probes") or {}).get("generator_cpu")) or {}
    tls, plain = (cpu.get("tls") or {}), (cpu.get("plain") or {})
    if tls.get("cpu_ms_per_req") is None or plain.get("cpu_ms_per_req") is None:
        return None
    process = tls.get("process") or "the local process"
    return round(tls["cpu_ms_per_req"] - plain["cpu_ms_per_req"], 6), f"local process probe ({process})"


def _measured(report: dict, name: str) -> tuple[float | None, str, str | None]:
    """(value in the budget's unit or None, where it comes from, why it is not judged or None)."""
    cost_name, metric = COST_OF[name]
    cost = _cost(report, cost_name, metric)
    arm, base = ARMS_OF[cost_name]
    if cost is None and name == "server_cpu_ms_per_req":
        local = _local_cpu(report)
        keepalive = _cost(report, "keepalive_tls", "ttlb_p50_us")
        if local is None:
            return None, "", "not measured: no server probe (or local process probe) sampled tls and plain"
        why = _why_not(keepalive) if keepalive else None
        projected = report.get("projection") or {}
        if not why and not (projected.get("source") == "local_process" and projected.get("keepalive_ci95")):
            why = f"unconfirmed: {UNCONFIRMED}"  # the CPU's own interval (over 3 or more rounds)
        return local[0], local[1], why
    if cost is None:
        return None, "", f"not measured: the {cost_name} cost needs the arms {arm} and {base}"
    source = f"{cost_name} cost, {arm} − {base}"
    if metric == "server_cpu_ms_per_req":
        return cost["delta"], f"{source}, server probe", _why_not(cost)
    return cost["delta"] / 1000.0, f"{source}, {metric}", _why_not(cost)


def _why_not(cost: dict) -> str | None:
    """Why a cost cannot clear or break a budget: not judged (its arms' checks), or unconfirmed (no
    interval; ``costs.UNCONFIRMED``); None when it is judged."""
    if cost.get("not_judged"):
        return cost["not_judged"]
    if cost.get("unconfirmed") or not cost.get("ci95"):
        return f"unconfirmed: {cost.get('unconfirmed') or UNCONFIRMED}"
    return None


def _judge_cost(report: dict, name: str, limit: float) -> dict:
    value, source, not_judged = _measured(report, name)
    if value is None:
        return _result(name, limit, None, SKIP, not_judged or "not measured")
    value = round(value, 6)
    unit = BUDGETS[name].unit
    if not_judged:
        return _result(name, limit, value, SKIP, f"could not judge: {not_judged}")
    cost = _cost(report, *COST_OF[name])
    said = verdict_words(cost) if cost else None
    if said and said["unexpected"]:  # a TLS arm faster than plain passes, but is no cost (nor saving)
        source += f": {said['label']}"
    if value > limit:
        return _result(name, limit, value, FAIL, f"{value:g} {unit} > {limit:g} {unit} ({source})")
    return _result(name, limit, value, PASS, f"{value:g} {unit} ≤ {limit:g} {unit} ({source})")


def _judge_checks(report: dict, limit: int) -> dict:
    checks = report.get("validity") or []
    judged = [check for check in checks if check.get("status") != SKIP]
    if not judged:
        return _result("failed_checks", limit, None, SKIP, "not measured: no validity check could judge")
    failed = [check["check"] for check in checks if check.get("status") == FAIL]
    names = f" ({', '.join(failed)})" if failed else ""
    if len(failed) > limit:
        return _result("failed_checks", limit, len(failed), FAIL, f"{len(failed)} failed > {limit}{names}")
    return _result("failed_checks", limit, len(failed), PASS, f"{len(failed)} failed ≤ {limit}{names}")


def evaluate(report: dict, budgets: dict) -> dict:
    """Each budget judged against ``report``: ``{"status", "results": [{"name", "limit", "value",
    "unit", "status", "detail"}]}`` in ``NAMES`` order. ``budgets`` is checked with ``clean``."""
    budgets = clean(budgets)
    results = []
    for name in NAMES:
        if name not in budgets:
            continue
        if name == "failed_checks":
            results.append(_judge_checks(report, budgets[name]))
        else:
            results.append(_judge_cost(report, name, budgets[name]))
    return {"status": overall([r["status"] for r in results]), "results": results}


def overall(statuses: list[str]) -> str:
    if FAIL in statuses:
        return FAIL
    if SKIP in statuses or not statuses:
        return SKIP
    return PASS


def describe() -> list[dict]:
    """The budgets for forms and docs: name, unit, what is measured."""
    return [{"name": b.name, "unit": b.unit, "what": b.what, "integer": b.integer} for b in BUDGETS.values()]
