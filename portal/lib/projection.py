"""The cost projection: how many extra server cores TLS needs at a given peak load, from the
measured CPU per request (the server probe's, or the local process's). Pure functions; the page
computes the same in static/js/run.js."""

from __future__ import annotations


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
