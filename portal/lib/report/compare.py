"""Side-by-side comparison of run reports (``tollgate.report/1``), by pure functions.

The first run is the reference (a target's pinned baseline, when the compare starts from one). What
differs in the setup is listed first, because a difference in numbers means little until one knows
what else changed. Changes of a cost between runs are judged by their 95% intervals: intervals that
do not overlap are a significant change; overlapping ones are not (a conservative test).
"""

from __future__ import annotations

from portal.lib.runs import runspec

ARM_METRICS = (
    ("ttlb_us", "p50"),
    ("ttlb_us", "p95"),
    ("ttlb_us", "p99"),
    ("ttfb_us", "p50"),
    ("tls_handshake_us", "p50"),
    ("connect_us", "p50"),
)


def _option_value(opt: runspec.Option):
    """A run option as the run's config recorded it; a run from before the option existed ran with
    its default (a new option's default is what the engine did before it)."""
    return lambda r: _shown(r["run"]["config"].get(opt.name, opt.default))


def _shown(value):
    """A config value in a table cell: numbers and flags as they are, lists of arms and paths in words."""
    if isinstance(value, list):
        return ", ".join(str(_shown(item)) for item in value) or "—"
    if isinstance(value, dict) and "path" in value:
        return f"{value['path']}×{value.get('weight', 1):g}"
    if isinstance(value, dict) and "name" in value:
        return value["name"]
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in value.items())
    return value


# How compare reads an option when the report knows more than the config: the TLS library that ran.
_FROM_REPORT = {"tls_library": lambda r: _tls_library(r)}


def setup_keys(options: dict[str, runspec.Option] = runspec.OPTIONS) -> tuple:
    """Setup facts whose differences are listed first: the target, every option that shapes the load
    (the arms and ``RunSpec``'s engine options, in the spec's order), then what the engine found."""
    load = [name for name, opt in options.items() if name == "arms" or opt.engine]
    return (
        ("target", lambda r: r["run"]["target"]["name"]),
        ("plain_url", lambda r: r["run"]["target"]["plain_url"]),
        ("tls_url", lambda r: r["run"]["target"]["tls_url"]),
        *((name, _FROM_REPORT.get(name) or _option_value(options[name])) for name in load),
        ("tls_protocol", lambda r: (r.get("tls_info") or {}).get("protocol")),
        ("tls_cipher", lambda r: (r.get("tls_info") or {}).get("cipher")),
        ("tls_group", lambda r: (r.get("tls_info") or {}).get("group")),
        ("cert_key", lambda r: _cert(r)),
        ("cert_chain_length", lambda r: (r.get("tls_info") or {}).get("chain_length")),
        ("cert_chain_bytes", lambda r: (r.get("tls_info") or {}).get("chain_bytes")),
        ("tls_resumption", lambda r: _resumption(r)),
        ("server_software", lambda r: server_software(r)),
        ("generator_host", lambda r: (r["run"].get("engine") or {}).get("host")),
        ("generator_cpu", lambda r: (r["run"].get("engine") or {}).get("cpu_model")),
        ("locust", lambda r: (r["run"].get("engine") or {}).get("locust")),
        ("openssl", lambda r: (r["run"].get("engine") or {}).get("openssl")),
        ("tollgate", lambda r: r["run"].get("tollgate")),
        ("scenario_version", lambda r: (r["run"].get("scenario") or {}).get("version")),
        ("config_hash", lambda r: r["run"].get("config_hash")),
    )


SETUP_KEYS = setup_keys()


def _cert(report: dict) -> str | None:
    info = report.get("tls_info") or {}
    if not info.get("cert_key_type"):
        return None
    return f"{info['cert_key_type']} {info.get('cert_key_bits')}"


def _resumption(report: dict) -> str | None:
    """Whether the TLS facts probe's reconnect resumed the session (``tls_info.session_resumed``);
    None when nothing is known."""
    resumed = (report.get("tls_info") or {}).get("session_resumed")
    return None if resumed is None else ("resumed" if resumed else "not resumed")


def server_software(report: dict) -> str | None:
    """What the target's ``Server`` headers said (``run.target.server_software``): one text when the
    TLS and the plain URL agree (or only one said anything), else both, named; None when nothing is
    known (no header, or a run from before it was recorded)."""
    software = (report["run"].get("target") or {}).get("server_software") or {}
    tls, plain = software.get("tls"), software.get("plain")
    if tls is None or plain is None or tls == plain:
        return tls or plain
    return f"{tls} (TLS URL), {plain} (plain URL)"


def _tls_library(report: dict) -> str | None:
    """The run's TLS library (``run.engine.tls_library``): choice, binding and OpenSSL. A run from
    before the choice existed ran on the system library."""
    engine = report["run"].get("engine") or {}
    if not engine:
        return None
    system = {"choice": "system", "binding": "ssl", "openssl": engine.get("openssl")}
    lib = engine.get("tls_library") or system
    return f"{lib['choice']}: {lib['binding']} on {lib['openssl']}"


def setup_differences(reports: list[dict], keys: tuple = SETUP_KEYS) -> tuple[list[dict], list[dict]]:
    """(differing, same): [{"key", "values": [per run]}]."""
    differing, same = [], []
    for key, get in keys:
        values = [get(r) for r in reports]
        (differing if len({repr(v) for v in values}) > 1 else same).append({"key": key, "values": values})
    return differing, same


def _change(value, reference) -> dict | None:
    if value is None or reference is None:
        return None
    delta = value - reference
    return {"delta": round(delta, 3), "pct": round(100.0 * delta / reference, 1) if reference else None}


def arm_table(reports: list[dict]) -> list[dict]:
    """Rows: arm × metric, values per run and the change against the first run."""
    names: list[str] = []
    for r in reports:
        for name in r["arms"]:
            if name not in names:
                names.append(name)
    rows = []
    for name in names:
        for metric, stat in ARM_METRICS:
            values = []
            for r in reports:
                summary = (r["arms"].get(name) or {}).get(metric)
                values.append(summary[stat] if summary else None)
            if all(v is None for v in values):
                continue
            samples = [((r["arms"].get(name) or {}).get(metric) or {}).get("count") for r in reports]
            rows.append(
                {
                    "arm": name,
                    "metric": f"{metric[:-3]}_{stat}_us",
                    "unit": "us",
                    "values": values,
                    "samples": samples,
                    "changes": [_change(v, values[0]) for v in values],
                }
            )
        rps = [(r["arms"].get(name) or {}).get("rps") for r in reports]
        rows.append(
            {
                "arm": name,
                "metric": "rps",
                "unit": "requests/s",
                "values": rps,
                "samples": [(r["arms"].get(name) or {}).get("requests") for r in reports],
                "changes": [_change(v, rps[0]) for v in rps],
            }
        )
    return rows


def significance(ci: list | None, reference_ci: list | None) -> str:
    """'significant' when the two 95% intervals do not overlap, 'not significant' when they do."""
    if not ci or not reference_ci:
        return "unknown"
    overlap = ci[0] <= reference_ci[1] and reference_ci[0] <= ci[1]
    return "not significant" if overlap else "significant"


def cost_table(reports: list[dict], metric: str = "ttlb_p50_us") -> list[dict]:
    """Per cost: each run's delta, interval and verdict, and whether it changed against run 1."""
    names: list[str] = []
    for r in reports:
        for cost in r.get("costs", []):
            if cost["metric"] == metric and cost["name"] not in names:
                names.append(cost["name"])
    rows = []
    for name in names:
        cells = []
        for r in reports:
            cells.append(
                next((c for c in r.get("costs", []) if c["name"] == name and c["metric"] == metric), None)
            )
        reference = cells[0]
        for cell in cells:
            if cell is None:
                continue
            cell["change"] = (
                None
                if reference is None or cell is reference
                else {
                    **(_change(cell["delta"], reference["delta"]) or {}),
                    # A cost without a verdict (its arms failed a check) supports no comparison.
                    "significance": significance(cell["ci95"], reference["ci95"])
                    if cell.get("not_judged") is None and reference.get("not_judged") is None
                    else "unknown",
                }
            )
        rows.append({"name": name, "metric": metric, "cells": cells})
    return rows


def compare(reports: list[dict]) -> dict:
    differing, same = setup_differences(reports)
    return {
        "runs": [
            {
                "id": r["run"]["id"],
                "status": r["run"]["status"],
                "error": r["run"].get("error"),
                "created": r["run"]["created"],
                "target": r["run"]["target"]["name"],
                "checks": r["run"].get("checks"),
                "invalid_arms": r["run"].get("invalid_arms") or {},
                "headline": r.get("headline"),
            }
            for r in reports
        ],
        "setup_differences": differing,
        "setup_same": same,
        "costs": cost_table(reports),
        "server_cpu_costs": cost_table(reports, "server_cpu_ms_per_req"),
        "arms": arm_table(reports),
        "openssl_speed": openssl_speed_table(reports),
    }


# The openssl speed figures compared across hosts and runs: (row label, section, key, figure).
SPEED_FIGURES = (
    ("sign/s", "signatures", "sign_per_s"),
    ("verify/s", "signatures", "verify_per_s"),
    ("bytes/s at 1024 B", "ciphers", "1024"),
    ("bytes/s at 16384 B", "ciphers", "16384"),
)


def openssl_speed_table(reports: list[dict]) -> dict | None:
    """Every probed host of every run as a column (run 1's first host is the reference), every
    algorithm × figure as a row, with the ratio to the reference: accelerator X against Y."""
    columns = []
    for i, r in enumerate(reports):
        for host, speed in ((r.get("probes") or {}).get("openssl_speed") or {}).items():
            columns.append({"run": i + 1, "host": host, "version": speed.get("version"), "speed": speed})
    if not columns:
        return None
    rows = []
    for label, section, key in SPEED_FIGURES:
        algorithms: list[str] = []
        for col in columns:
            for alg in col["speed"].get(section) or {}:
                if alg not in algorithms:
                    algorithms.append(alg)
        for alg in algorithms:
            values = [((col["speed"].get(section) or {}).get(alg) or {}).get(key) for col in columns]
            reference = values[0]
            rows.append(
                {
                    "algorithm": alg,
                    "figure": label,
                    "values": values,
                    "ratios": [
                        round(v / reference, 3) if v is not None and reference else None for v in values
                    ],
                }
            )
    return {
        "columns": [{k: col[k] for k in ("run", "host", "version")} for col in columns],
        "rows": rows,
    }
