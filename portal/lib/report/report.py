"""The report (schema ``tollgate.report/1``), computed from stored histograms by pure functions.

Input is plain data (see ``portal.runs.reporting`` for the adapter from models), so this module is
tested without a database. Documented in docs/report-schema.md.

``build_report`` assembles it: rounds merged (``portal.lib.stats.rounds``), each arm's section and its
deltas (here), costs (``portal.lib.stats.costs``), the headline (``portal.lib.report.headline``), validity
(``portal.lib.validity``), probes (here) and the cost projection (``portal.lib.stats.projection``). Chart
data for the page is in ``portal.lib.report.charts``.
"""

from __future__ import annotations

import statistics

from portal.lib import validity
from portal.lib.report import answers, evidence
from portal.lib.report.headline import headline
from portal.lib.stats import capacity, costs, generators, hdr, wan
from portal.lib.stats.projection import projection_inputs, with_intervals
from portal.lib.stats.rounds import LATENCY_METRICS, merge_rounds
from portal.lib.tls import advice, matrix, tlswords
from portal.lib.validity import http3

SCHEMA = "tollgate.report/1"
BASE_ARM = "plain"


def _spread(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}


def arm_section(arm: dict) -> dict:
    """One arm's entry of the report. ``arm['hist']`` maps metric name to encoded histogram."""
    hist = arm.get("hist", {})
    series = arm.get("series") or []
    section = {
        "url": arm["url"],
        "complete": arm.get("complete", True),
        "stopped": arm.get("stopped") or None,
        "users": arm.get("users"),
        "warmup_s": arm.get("warmup_s"),
        "warmup_requests_excluded": arm.get("warmup_requests", 0),
        "unwindowed_requests_excluded": arm.get("unwindowed_requests", 0),
        "requests": arm["requests"],
        "failures": arm["failures"],
        "duration_s": round(arm["duration_s"], 3),
        "rps": round(arm["rps"], 2),
    }
    for metric in LATENCY_METRICS:
        section[metric] = hdr.summary(hdr.decode(hist.get(metric)))
    section.update(
        status_codes=dict(arm.get("status_codes", {})),
        response_bytes={"min": arm.get("response_bytes_min"), "max": arm.get("response_bytes_max")},
        connections_opened=arm.get("connections_opened", 0),
        connections_reopened=arm.get("connections_reopened"),
        tls_sessions_reused=arm.get("tls_sessions_reused", 0),
        errors=arm.get("errors", {}),
        requested_url=arm.get("requested_url") or arm["url"],
        targets=arm.get("targets") or [],
        redirects=arm.get("redirects") or [],
        sizes_by_path=arm.get("sizes_by_url") or {},
        content_by_path=arm.get("content_by_url") or {},
        late_requests=arm.get("late_requests", 0),
        max_schedule_lag_us=arm.get("max_schedule_lag_us", 0),
        generator={
            "cpu_pct": _spread([p.get("gen_cpu_pct") for p in series]),
            "loop_lag_ms": _spread([p.get("loop_lag_ms") for p in series]),
            "runq_wait_pct": _spread([p.get("gen_runq_pct") for p in series]),
        },
        rounds=arm.get("rounds") or [],
        server_cpu_ms_per_req=arm.get("server_cpu_ms_per_req"),
        http2=arm.get("http2"),
        quic=arm.get("quic"),
        series=series,
        hdr={metric: hist.get(metric) or None for metric in LATENCY_METRICS},
    )
    return section


def pct(delta: float, base: float) -> float | None:
    return round(100.0 * delta / base, 1) if base else None


def deltas_vs(arms: dict[str, dict], base: str = BASE_ARM) -> dict[str, dict]:
    """Each arm minus the base arm: latency percentiles in µs and %, throughput in %."""
    if base not in arms:
        return {}
    ref = arms[base]
    out: dict[str, dict] = {}
    for name, section in arms.items():
        if name == base:
            continue
        entry: dict = {"vs": base}
        for metric in ("ttfb_us", "ttlb_us"):
            mine, theirs = section.get(metric), ref.get(metric)
            if not mine or not theirs:
                entry[metric] = None
                continue
            entry[metric] = {
                key: {"delta": mine[key] - theirs[key], "pct": pct(mine[key] - theirs[key], theirs[key])}
                for key in ("p50", "p95", "p99")
            }
        entry["rps_pct"] = pct(section["rps"] - ref["rps"], ref["rps"])
        out[name] = entry
    return out


def _cpu_by_arm(merged: list[dict], windows_key: str, per_req_key: str, timeline: bool = False) -> dict:
    """A sampled process's CPU per arm, its rounds' windows summed (``workers.probes.cpu.cpu_in_window``)."""
    out = {}
    for arm in merged:
        windows = arm.get(windows_key) or []
        if not windows:
            continue
        entry = {
            "cpu_s": round(sum(w["cpu_s"] for w in windows), 6),
            "cpu_ms_per_req": arm.get(per_req_key),
            "requests": arm["requests"],
            "samples": sum(w.get("samples", 0) for w in windows),
            "process": windows[0].get("process"),
        }
        if timeline:
            entry["host_cpu_pct"] = [w.get("host_cpu_pct") for w in windows]
            entry["timeline"] = [point for w in windows for point in w.get("timeline", [])]
            entry["cpu_pct_ma15"] = [value for w in windows for value in w.get("cpu_pct_ma15", [])]
        out[arm["arm"]] = entry
    return out


def probes_section(probes: dict | None, merged: list[dict]) -> dict | None:
    """``probes`` of the report: what the server probes found, per host and per arm."""
    server_cpu = _cpu_by_arm(merged, "server_cpu_windows", "server_cpu_ms_per_req", timeline=True)
    generator_cpu = _cpu_by_arm(merged, "generator_cpu_windows", "generator_probe_cpu_ms_per_req")
    probes = probes or {}
    if not probes and not server_cpu and not generator_cpu:
        return None
    return {
        "server": probes.get("server"),
        "host_key": probes.get("host_key"),
        "openssl_speed": probes.get("openssl_speed") or {},
        "cryptsetup": probes.get("cryptsetup"),
        "server_cpu": server_cpu,
        "generator_cpu": generator_cpu,
        "errors": probes.get("errors") or [],
    }


def build_report(
    run: dict,
    arms: list[dict],
    tls_info: dict | None = None,
    probes: dict | None = None,
    variants: list[dict] | None = None,
    capacity_stages: dict | None = None,
) -> dict:
    """The whole report. ``arms``: stored rows (one per arm and round) in run order; missing arms
    (failed or not reached) are absent. ``variants``: the TLS matrix's probed variants
    (``Run.variants``). ``capacity_stages``: the saturation search's stages (``Run.capacity``).
    Costs and validity are derived here, on every read."""
    merged = merge_rounds(arms)
    arm_sections = {arm["arm"]: arm_section(arm) for arm in merged}
    cost_inputs = {
        name: {
            "ttlb_us": section["ttlb_us"],
            "ttfb_us": section["ttfb_us"],
            "rps": section["rps"],
            "series": section["series"],
            "rounds": section["rounds"],
            "server_cpu_ms_per_req": section["server_cpu_ms_per_req"],
        }
        for name, section in arm_sections.items()
    }
    config = run.get("config") or {}
    checks = validity.check_all(config, arm_sections, tls_info or {})
    invalid = {}
    for name, section in arm_sections.items():
        section["breakdown"] = breakdown(section)
        section["invalid"] = validity.invalid_arm(config, section)
        if section["invalid"]:
            invalid[name] = section["invalid"]
    cost_list = evidence.judge_costs(costs.compute_costs(cost_inputs), checks, invalid)
    probed = probes_section(probes, merged)
    projected = with_intervals(projection_inputs(arm_sections, probed), cost_inputs, probed)
    tuned = tuning(config, arm_sections, cost_inputs, tls_info, variants, probed)
    missing = answers.missing_arms(config, arm_sections, run.get("refused_arms"), invalid)
    return {
        "schema": SCHEMA,
        "run": {**run, "checks": evidence.check_counts(checks), "invalid_arms": invalid},
        "answers": answers.answer_rows(
            config, cost_list, tuned["advice"], projected, missing, cost_inputs, probed, tuned["matrix"]
        ),
        "headline": with_refused(headline(cost_list), run.get("refused_arms")),
        "arms": arm_sections,
        "deltas": deltas_vs(arm_sections),
        "costs": cost_list,
        "validity": checks,
        "tls_info": tls_info or None,
        "quic": http3.quic_rows(arm_sections),
        "probes": probed,
        "projection": projected,
        "generators": generators.report_generators(arms),
        **tuned,
        **capacity_keys(capacity_stages),
    }


def with_refused(text: str | None, refused: list[dict] | None) -> str | None:
    """The headline, then one sentence per arm the server refused (not measured, never replaced by
    HTTP/1.1): its reason says which protocol the server offered instead."""
    said = [
        f"Arm {entry['arm']} not measured: {entry['reason'].removeprefix(entry['arm'] + ' refused: ')}."
        for entry in refused or []
    ]
    if not said:
        return text
    return " ".join([text, *said] if text else said)


def measured_nothing(config: dict, arms: list[dict]) -> str | None:
    """Why a run measured nothing when none of its arms is valid, from its stored rows (rounds merged
    and arms judged as in ``build_report``; ``validity.measured_nothing``); None when one is valid.
    The executor asks it once the engine has finished: such a run ends ``failed`` with this reason."""
    sections = {arm["arm"]: arm_section(arm) for arm in merge_rounds(arms)}
    return validity.measured_nothing(config, sections)


def capacity_keys(stages: dict | None) -> dict:
    """``capacity`` (per searched arm: knee, max_rps, limited_by, points; portal.lib.stats.capacity) and
    ``capacity_cost`` (the capacity cost of TLS in words, or why none is claimed)."""
    section = capacity.section(stages)
    return {"capacity": section, "capacity_cost": capacity.tls_cost_words(section)}


def tuning(
    config: dict,
    sections: dict,
    inputs: dict,
    tls_info: dict | None,
    variants: list[dict] | None,
    probes: dict | None = None,
) -> dict:
    """``matrix`` (the TLS configuration matrix's variants), ``advice`` (ranked by measured saving),
    ``wan`` (the projection at each RTT) and ``wan_model`` (its inputs and assumptions)."""
    try:
        rtts = wan.parse_rtts(config.get("wan_rtt_ms"))
    except ValueError:
        rtts = list(wan.DEFAULT_RTTS_MS)
    # A new-connection sub-arm against a new plain connection when there is one; keep-alive against plain.
    new_control = "plain_new" if "plain_new" in sections else "plain"
    handshake_costs = {
        name: costs.compare(
            "variant_cost", name, new_control if "_new" in matrix.base_arm(name) else "plain", inputs
        )
        for name in sections
        if matrix.is_variant(name)
    }
    # An HTTP/2 sub-arm against its HTTP/1.1 twin, the same variant (h2_new@1.3 − tls_new@1.3), named as
    # the arms' own HTTP/2 cost (``h2_new_vs_tls_new``, ``h2_vs_tls``: either way).
    twin_costs = {
        name: costs.compare(f"{matrix.base_arm(name)}_vs_{matrix.base_arm(twin)}", name, twin, inputs)
        for name in sections
        if (twin := matrix.http1_twin(name)) in sections
    }
    entries = matrix.matrix_section(variants, sections, handshake_costs, twin_costs)
    local = (probes or {}).get("generator_cpu") or {}
    refused_groups = {
        matrix.canonical_group(g.get("name"))
        for g in (tls_info or {}).get("groups") or []
        if g.get("accepted") is False
    }
    for entry in entries:
        # A refusal in words; the TLS library's own text stays in ``detail`` (the evidence).
        words = tlswords.reword(entry["detail"], probed_variant(variants, entry["arm"]), refused_groups)
        entry["detail_words"] = words if words != entry["detail"] else None
        # Each variant's CPU: the server probe's, else the sampled local process's (e.g. a test
        # server on the generator host), saying which.
        if entry["server_cpu_ms_per_req"] is not None:
            entry["cpu_source"] = "server_probe"
        elif (local.get(entry["arm"]) or {}).get("cpu_ms_per_req") is not None:
            entry["server_cpu_ms_per_req"] = local[entry["arm"]]["cpu_ms_per_req"]
            entry["cpu_source"] = "local_process"
        else:
            entry["cpu_source"] = None
    probed = {
        p["name"]: {**p, "variant": matrix.report_variant(p.get("variant") or {})} for p in variants or []
    }
    return {
        "matrix": entries,
        "advice": advice.advise(entries, inputs, sections, probes),
        "wan": wan.project(sections, tls_info, rtts, probed),
        "wan_model": wan.model_inputs(rtts, tls_info),
    }


def probed_variant(variants: list[dict] | None, name: str) -> dict:
    """The variant the engine probed for the sub-arm ``name`` (its dimensions' values)."""
    return next((p.get("variant") or {} for p in variants or [] if p.get("name") == name), {})


def config_hash(config: dict) -> str:
    """A short fingerprint of what was asked (engine config without secrets), to spot equal setups."""
    import hashlib
    import json

    # Budgets judge a run, they do not change what it measures.
    public = {k: v for k, v in config.items() if k not in ("secrets", "headers", "budgets")}
    digest = hashlib.sha256(json.dumps(public, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:16]


def breakdown(section: dict) -> dict:
    """Where a request's time goes, from the means (means add up; medians do not):
    connect + handshake + waiting for the first byte + transfer = TTLB (for arms that open a
    connection per request; keep-alive arms have no connect or handshake in the window)."""

    def mean(metric: str) -> float:
        summary = section.get(metric)
        return summary["mean"] if summary else 0.0

    connect, handshake = mean("connect_us"), mean("tls_handshake_us")
    ttfb, ttlb = mean("ttfb_us"), mean("ttlb_us")
    return {
        "connect_us": round(connect, 1),
        "tls_handshake_us": round(handshake, 1),
        "wait_us": round(max(0.0, ttfb - connect - handshake), 1),
        "transfer_us": round(max(0.0, ttlb - ttfb), 1),
        "ttlb_mean_us": round(ttlb, 1),
    }
