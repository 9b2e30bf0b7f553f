"""Metric names in words, with the unit the page shows them in. Pure functions.

The report stores latencies in µs (``ttlb_p50_us``); the page shows them in ms. A reader sees
"time to last byte, median (ms)" and the value in ms beside it, never a bare ``ttlb_p50_us``.
"""

from __future__ import annotations

import re

QUANTITIES = {
    "ttlb": "time to last byte",
    "ttfb": "time to first byte",
    "connect": "TCP connect",
    "tls_handshake": "TLS handshake",
}
STATISTICS = {"p50": "median", "mean": "mean", "min": "minimum", "max": "maximum"}
# Names that are not a latency statistic: (words, unit shown, decimals).
OTHER = {
    "rps": ("throughput", "req/s", 1),
    "server_cpu_ms_per_req": ("server CPU per request", "CPU-ms", 4),
    "requests": ("requests", "requests", 0),
    "failures": ("failures", "requests", 0),
}
# What a cost's 95% interval was bootstrapped over (``ci_method``).
CI_METHODS = {"per_second": "seconds", "rounds": "rounds", "none": "no interval"}
_LATENCY = re.compile(r"^(?P<quantity>[a-z_]+?)_(?P<stat>p\d+(?:\.\d+)?|mean|min|max)_us$")
US_PER_MS = 1000.0


def describe(metric: str) -> dict:
    """``{"words", "unit", "scale", "decimals"}``: a shown value is ``stored × scale`` in ``unit``.
    Unknown names come back as they are (unit ``""``), so a new metric is never hidden."""
    latency = _LATENCY.match(metric)
    if latency and latency["quantity"] in QUANTITIES:
        stat = STATISTICS.get(latency["stat"], latency["stat"])
        words = f"{QUANTITIES[latency['quantity']]}, {stat}"
        return {"words": words, "unit": "ms", "scale": 1 / US_PER_MS, "decimals": 2}
    if metric in OTHER:
        words, unit, decimals = OTHER[metric]
        return {"words": words, "unit": unit, "scale": 1.0, "decimals": decimals}
    return {"words": metric, "unit": "", "scale": 1.0, "decimals": 2}


def label(metric: str) -> str:
    """``ttlb_p50_us`` → ``time to last byte, median (ms)``."""
    d = describe(metric)
    return f"{d['words']} ({d['unit']})" if d["unit"] else d["words"]


def shown(value: float | None, metric: str, signed: bool = False) -> str:
    """A stored value in the shown unit, without the unit: ``1234`` µs of a latency → ``1.23``."""
    if value is None:
        return "—"
    d = describe(metric)
    number = value * d["scale"]
    return f"{number:+,.{d['decimals']}f}" if signed else f"{number:,.{d['decimals']}f}"


def with_unit(value: float | None, metric: str, signed: bool = False) -> str:
    """``shown`` with its unit: ``+1.23 ms``, ``-52.0 req/s``."""
    if value is None:
        return "—"
    unit = describe(metric)["unit"]
    text = shown(value, metric, signed)
    return f"{text} {unit}" if unit else text


def interval(ci95, metric: str) -> str:
    """A 95% interval with its unit: ``+0.07 … +0.09 ms``; ``—`` without one."""
    if not ci95 or ci95[0] is None or ci95[1] is None:
        return "—"
    unit = describe(metric)["unit"]
    text = f"{shown(ci95[0], metric, True)} … {shown(ci95[1], metric, True)}"
    return f"{text} {unit}" if unit else text
