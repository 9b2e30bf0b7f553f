"""Tuning advice: what would make TLS cheaper here, ranked by the saving this run measured.

Never advice for what was not measured: every item rests on two arms (or matrix sub-arms) of this
run that differ in one thing only, with their numbers as evidence.

* Matrix pairs: per repeated arm (``tls_new``; ``tls`` for the protocol), for each dimension and each
  two of its values (e.g. cert ``rsa`` → ``ecdsa``), the first pair of measured sub-arms that differ
  in that dimension only (variant order) is compared:
  saving = TTLB p50 of the costlier − TTLB p50 of the cheaper (µs, per new connection, with the
  95% CI of ``portal.lib.costs.compare``), plus the server CPU-ms per request when both were probed.
  ``consistent`` counts how many of all such pairs (other dimensions at any value) agree in sign.
* Standard arms: resumption (``tls_new`` − ``tls_resumed``) and connection reuse (``tls_new`` −
  ``tls``), when those arms ran.

Only positive savings become advice (a change that costs more is not advice); an item whose CI
contains 0 stays, marked ``verdict: negligible``. Ranked by ``saving_us``, largest first.
"""

from __future__ import annotations

import itertools

from portal.lib import costs
from portal.lib.matrix import DIMENSIONS, MATRIX_ARM, REPORT_KEYS, VALUES, base_arm
from portal.lib.matrix import label as value_label


def _cpu_saving(arms: dict[str, dict], costly: str, cheap: str) -> float | None:
    a = (arms.get(costly) or {}).get("server_cpu_ms_per_req")
    b = (arms.get(cheap) or {}).get("server_cpu_ms_per_req")
    return round(a - b, 6) if a is not None and b is not None else None


def _item(title: str, entry: dict, arms: dict[str, dict], evidence: str, **extra) -> dict:
    """``entry``: costly − cheap (``costs.compare``); its delta is the saving."""
    costly, cheap = entry["arm"], entry["base"]
    return {
        "title": title,
        "saving_us": entry["delta"],
        "saving_pct": entry["delta_pct"],
        "saving_server_cpu_ms": _cpu_saving(arms, costly, cheap),
        "ci95": entry["ci95"],
        "ci_method": entry["ci_method"],
        "verdict": entry["verdict"],
        "arms": [costly, cheap],
        "evidence": evidence,
        **extra,
    }


def _evidence(entry: dict, arms: dict[str, dict]) -> str:
    costly, cheap = entry["arm"], entry["base"]
    ci = (
        f"95% CI {entry['ci95'][0]}…{entry['ci95'][1]} µs ({entry['ci_method']})"
        if entry["ci95"]
        else "no CI"
    )
    text = (
        f"{costly}: TTLB p50 {entry['arm_value']} µs over {arms[costly]['requests']} requests; "
        f"{cheap}: {entry['base_value']} µs over {arms[cheap]['requests']} requests; {ci}"
    )
    cpu = _cpu_saving(arms, costly, cheap)
    if cpu is not None:
        mine, theirs = arms[costly]["server_cpu_ms_per_req"], arms[cheap]["server_cpu_ms_per_req"]
        text += f"; server CPU {mine} vs {theirs} ms/req"
    return text + "."


def _matrix_pairs(matrix: list[dict], dim: str, a: str, b: str) -> list[tuple[str, str]]:
    """(arm with value a, arm with value b) of measured sub-arms equal in every other dimension."""
    measured = [m for m in matrix if m["status"] == "measured" and m.get("requests")]
    others = [REPORT_KEYS[d] for d in DIMENSIONS if d != dim]
    key = REPORT_KEYS[dim]
    return [
        (x["arm"], y["arm"])
        for x, y in itertools.permutations(measured, 2)
        if x["variant"].get(key) == a
        and y["variant"].get(key) == b
        and all(x["variant"].get(o) == y["variant"].get(o) for o in others)
    ]


def _pair_advice(
    dim: str, a: str, b: str, pairs: list[tuple[str, str]], inputs: dict, arms: dict
) -> dict | None:
    """One item from the matched pairs of one dimension's two values (on one base arm)."""
    first = costs.compare(dim, pairs[0][0], pairs[0][1], inputs)
    if first is None or first["delta"] == 0:
        return None
    # Orient as costly − cheap: the saving is positive.
    costly_value, cheap_value = (a, b) if first["delta"] > 0 else (b, a)
    if first["delta"] < 0:
        first = costs.compare(dim, pairs[0][1], pairs[0][0], inputs)
    signs = [costs.compare(dim, x, y, inputs) for x, y in pairs]
    agree = sum(1 for e in signs if e and (e["delta"] > 0) == (costly_value == a))
    label = value_label(dim, cheap_value)
    title = f"{label[0].upper()}{label[1:]} instead of {value_label(dim, costly_value)}"
    base = base_arm(pairs[0][0])
    if base != MATRIX_ARM:
        title += f" ({base}: on warm keep-alive connections)"
    evidence = _evidence(first, arms) + f" The same sign in {agree} of {len(pairs)} matched pair(s)."
    return _item(title, first, arms, evidence, dimension=dim, consistent=[agree, len(pairs)])


# Full-handshake round trips by the matrix's protocol values (portal.lib.wan's model).
FULL_ROUND_TRIPS = {"tls1.2": 2, "tls1.3": 1}


def _round_trip_caveat(item: dict, variants: dict[str, dict]) -> None:
    """A protocol saving measured next to the server can be a loss for users away from it: TLS 1.2's
    full handshake costs one round trip more than 1.3's. Say so, with the RTT beyond which the
    change is dearer (the WAN projection's model), on new connections without resumption."""
    costly, cheap = (variants.get(name) or {} for name in item["arms"])
    extra = FULL_ROUND_TRIPS.get(cheap.get("protocol"), 0) - FULL_ROUND_TRIPS.get(costly.get("protocol"), 0)
    resumed = cheap.get("resumption") in ("ticket", "session_id")
    if (
        item.get("dimension") != "protocol"
        or extra <= 0
        or resumed
        or base_arm(item["arms"][1]) != MATRIX_ARM
    ):
        return
    break_even_ms = round(item["saving_us"] / 1000.0 / extra, 3)
    item.update(extra_round_trips=extra, break_even_rtt_ms=break_even_ms)
    item["title"] += (
        f" — measured next to the server only: it costs {extra} more round trip per new connection, "
        f"so it is dearer for users more than {break_even_ms:g} ms RTT away (see the WAN projection)"
    )
    item["evidence"] += (
        f" TLS {cheap['protocol'][3:]} full handshake: {FULL_ROUND_TRIPS[cheap['protocol']]} round trips, "
        f"TLS {costly['protocol'][3:]}: {FULL_ROUND_TRIPS[costly['protocol']]}."
    )


def matrix_advice(matrix: list[dict], inputs: dict[str, dict], arms: dict[str, dict]) -> list[dict]:
    out = []
    variants = {entry["arm"]: entry["variant"] for entry in matrix}
    for base in dict.fromkeys(entry["base_arm"] for entry in matrix):
        entries = [entry for entry in matrix if entry["base_arm"] == base]
        for dim in DIMENSIONS:
            for a, b in itertools.combinations(VALUES[dim], 2):
                pairs = _matrix_pairs(entries, dim, a, b)
                item = _pair_advice(dim, a, b, pairs, inputs, arms) if pairs else None
                if item is not None:
                    _round_trip_caveat(item, variants)
                    out.append(item)
    return out


def arm_advice(inputs: dict[str, dict], arms: dict[str, dict]) -> list[dict]:
    out = []
    for title, costly, cheap in (
        ("TLS session resumption for returning clients (tls_resumed vs tls_new)", "tls_new", "tls_resumed"),
        ("Connection reuse (keep-alive) instead of a new TLS connection per request", "tls_new", "tls"),
    ):
        entry = costs.compare(title, costly, cheap, inputs)
        if entry is not None and entry["delta"] > 0:
            out.append(_item(title, entry, arms, _evidence(entry, arms), dimension=None))
    return out


def advise(matrix: list[dict], inputs: dict[str, dict], arms: dict[str, dict]) -> list[dict]:
    """The report's ``advice``: ``[{"title", "saving_us", "saving_server_cpu_ms", "ci95",
    "evidence", …}]``, largest measured saving first."""
    items = [i for i in matrix_advice(matrix, inputs, arms) + arm_advice(inputs, arms) if i["saving_us"] > 0]
    return sorted(items, key=lambda item: item["saving_us"], reverse=True)
