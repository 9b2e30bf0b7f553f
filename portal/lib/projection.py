"""The cost projection: how many extra server cores TLS needs at a given peak load, from the
measured server CPU per request. Pure functions; the page computes the same in static/js/run.js."""

from __future__ import annotations


def projection_inputs(arms: dict[str, dict]) -> dict | None:
    """What the cost projection needs: the extra server CPU-ms per request TLS adds on a warm
    connection (``tls`` − ``plain``) and on a new one (``tls_new`` − ``plain_new``; without the
    ``plain_new`` control, ``tls_new`` − ``plain``, which also charges the TCP setup to TLS — said
    in ``new_base``). None without server CPU for ``plain``, ``tls`` and ``tls_new``."""

    def cpu(name: str) -> float | None:
        return (arms.get(name) or {}).get("server_cpu_ms_per_req")

    if cpu("plain") is None or cpu("tls") is None or cpu("tls_new") is None:
        return None
    new_base = "plain_new" if cpu("plain_new") is not None else "plain"
    return {
        "keepalive_ms_per_req": round(cpu("tls") - cpu("plain"), 6),
        "new_ms_per_req": round(cpu("tls_new") - cpu(new_base), 6),
        "new_base": new_base,
        "formula": "extra cores = peak req/s × ((1 − f) × Δkeep-alive + f × Δnew) / 1000 ms",
    }


def project_cores(projection: dict, peak_rps: float, new_share: float) -> float:
    """Extra server cores TLS needs at ``peak_rps`` with ``new_share`` (0–1) of the requests on new
    connections. The page computes the same in static/js/run.js as the user types."""
    if not 0.0 <= new_share <= 1.0 or peak_rps < 0:
        raise ValueError("peak_rps must be ≥ 0 and new_share within 0–1")
    per_req_ms = (1.0 - new_share) * projection["keepalive_ms_per_req"] + new_share * projection[
        "new_ms_per_req"
    ]
    return peak_rps * per_req_ms / 1000.0
