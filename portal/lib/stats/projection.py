"""The cost projection: how many extra server cores TLS needs at a given peak load, from the
measured CPU per request (the server probe's, or the local process's), with a 95% interval when the
CPU has one (over 3 or more rounds: ``portal.lib.stats.costs``). Pure functions; the page computes the
same in static/js/run.js.

The interval of the cores is conservative: the two CPU costs' intervals combined end to end,
peak × ((1 − f) × [lo, hi] of Δkeep-alive + f × [lo, hi] of Δnew) / 1000 — never narrower than the
interval of the combination itself (the sum of two estimates varies at most by the sum of their
spreads), and linear in the user's inputs, so the page recomputes it as they type."""

from __future__ import annotations

from portal.lib.stats import costs

# The peak the answer table states the cores at (the projection's form starts from the same).
DEFAULT_PEAK_RPS = 1000.0
DEFAULT_NEW_SHARE = 0.1
CPU = "server_cpu_ms_per_req"


def cpu_inputs(inputs: dict[str, dict], source: str, probes: dict | None) -> dict[str, dict]:
    """The cost inputs (``portal.lib.report.report``) with the CPU of ``source`` as each arm's and round's
    ``server_cpu_ms_per_req``: the server probe's as they are, else the sampled local process's."""
    if source == "server_probe":
        return inputs
    local = (probes or {}).get("generator_cpu") or {}
    return {
        name: {
            **arm,
            CPU: (local.get(name) or {}).get("cpu_ms_per_req"),
            "rounds": [{**r, CPU: r.get("generator_probe_cpu_ms_per_req")} for r in arm.get("rounds") or []],
        }
        for name, arm in inputs.items()
    }


def with_intervals(projection: dict | None, inputs: dict[str, dict], probes: dict | None) -> dict | None:
    """The projection with the 95% intervals of its two CPU costs (``keepalive_ci95``,
    ``new_ci95``: CPU-ms per request, null below 3 rounds) and their methods."""
    if projection is None:
        return None
    cpu = cpu_inputs(inputs, projection["source"], probes)
    out = dict(projection)
    for key, arm, base in (("keepalive", "tls", "plain"), ("new", "tls_new", projection["new_base"])):
        entry = costs.compare(key, arm, base, cpu, CPU)
        out[f"{key}_ci95"] = entry["ci95"] if entry else None
        out[f"{key}_ci_method"] = entry["ci_method"] if entry else "none"
    return out


def projection_inputs(arms: dict[str, dict], probes: dict | None = None) -> dict | None:
    """What the cost projection needs: the extra CPU-ms per request TLS adds on a warm connection
    (``tls`` − ``plain``) and on a new one (``tls_new`` − ``plain_new``; without the ``plain_new``
    control, ``tls_new`` − ``plain``, which also charges the TCP setup to TLS — said in
    ``new_base``). The CPU is the server probe's (SSH) when it sampled ``plain``, ``tls`` and
    ``tls_new``, else the local process's (sampled on the generator host, e.g. the demo target):
    the figures the page shows beside the projection, named in ``source`` and ``process``. None
    when neither sampled those three arms."""
    probes = probes or {}
    server = {name: (arm or {}).get("server_cpu_ms_per_req") for name, arm in arms.items()}
    local = {name: c.get("cpu_ms_per_req") for name, c in (probes.get("generator_cpu") or {}).items()}
    for source, cpu, detail in (
        ("server_probe", server, probes.get("server_cpu") or {}),
        ("local_process", local, probes.get("generator_cpu") or {}),
    ):
        if any(cpu.get(name) is None for name in ("plain", "tls", "tls_new")):
            continue
        new_base = "plain_new" if cpu.get("plain_new") is not None else "plain"
        return {
            "keepalive_ms_per_req": round(cpu["tls"] - cpu["plain"], 6),
            "new_ms_per_req": round(cpu["tls_new"] - cpu[new_base], 6),
            "new_base": new_base,
            "source": source,
            "process": (detail.get("tls") or {}).get("process"),
            "cpu_ms_per_req": {name: cpu[name] for name in ("plain", "tls", new_base, "tls_new")},
            "formula": "extra cores = peak req/s × ((1 − f) × Δkeep-alive + f × Δnew) / 1000 ms",
        }
    return None


def project_cores(projection: dict, peak_rps: float, new_share: float) -> float:
    """Extra server cores TLS needs at ``peak_rps`` with ``new_share`` (0–1) of the requests on new
    connections. The page computes the same in static/js/run.js as the user types."""
    if not 0.0 <= new_share <= 1.0 or peak_rps < 0:
        raise ValueError("peak_rps must be ≥ 0 and new_share within 0–1")
    per_req_ms = (1.0 - new_share) * projection["keepalive_ms_per_req"] + new_share * projection[
        "new_ms_per_req"
    ]
    return peak_rps * per_req_ms / 1000.0


def cores_interval(projection: dict, peak_rps: float, new_share: float) -> list[float] | None:
    """The 95% interval of ``project_cores`` (conservative, module docstring); None when either CPU
    cost has no interval."""
    keepalive, new = projection.get("keepalive_ci95"), projection.get("new_ci95")
    if not keepalive or not new:
        return None
    if not 0.0 <= new_share <= 1.0 or peak_rps < 0:
        raise ValueError("peak_rps must be ≥ 0 and new_share within 0–1")
    return [peak_rps * ((1.0 - new_share) * keepalive[i] + new_share * new[i]) / 1000.0 for i in (0, 1)]
