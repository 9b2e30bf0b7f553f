"""The report's headline: the answer in one sentence, worded from the computed costs
(``portal.lib.costs``). Pure functions."""

from __future__ import annotations

COST_WORDS = {
    "keepalive_tls": "TLS on warm (keep-alive) connections",
    "handshake": "a full TLS handshake per request",
    "resumption_saving": "session resumption",
}


def _ms(us: float) -> str:
    return f"{us / 1000:+.2f} ms"


def headline(costs: list[dict]) -> str | None:
    """The answer in one sentence, from the TTLB-median costs with their intervals and verdicts."""
    parts = []
    for cost in costs:
        if cost["metric"] != "ttlb_p50_us":
            continue
        pct = f", {cost['delta_pct']:+.0f}%" if cost["delta_pct"] is not None else ""
        ci = ""
        if cost["ci95"]:
            ci = f", 95% CI {cost['ci95'][0] / 1000:+.2f} … {cost['ci95'][1] / 1000:+.2f} ms"
        if cost["name"] == "resumption_saving":
            saved = cost["delta"] / 1000
            parts.append(
                f"session resumption saves {saved:.2f} ms per new connection ({cost['verdict']}{ci})"
            )
        else:
            if cost["delta"] >= 0:
                what = f"{COST_WORDS[cost['name']]} adds {_ms(cost['delta'])} median time to last byte"
            else:
                what = (
                    f"{COST_WORDS[cost['name']]} changes the median time to last byte by {_ms(cost['delta'])}"
                )
            cpu = next(
                (c for c in costs if c["name"] == cost["name"] and c["metric"] == "server_cpu_ms_per_req"),
                None,
            )
            if cpu is not None:
                what += f" and {cpu['delta']:+.3f} server CPU-ms per request"
            parts.append(f"{what} ({cost['verdict']}{pct}{ci})")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."
