"""Tuning advice: what would make TLS cheaper here, ranked by the saving this run measured.

Never advice for what was not measured: every item rests on two arms (or matrix sub-arms) of this
run that differ in one thing only, with their numbers as evidence.

* Matrix pairs: per repeated arm (``tls_new`` and ``h2_new``; ``tls`` and ``h2`` for the protocol;
  the title says which, ``WHERE``, except for ``tls_new``), for each dimension and each two of its
  values (e.g. cert ``rsa`` → ``ecdsa``), the first pair of measured sub-arms that differ in that
  dimension only (variant order) is compared:
  saving = TTLB p50 of the costlier − TTLB p50 of the cheaper (µs, per new connection, with the
  95% CI of ``portal.lib.stats.costs.compare``), plus the server CPU-ms per request when both were probed.
  ``consistent`` counts how many of all such pairs (other dimensions at any value) agree in sign.
* Standard arms: resumption (``tls_new`` − ``tls_resumed``) and connection reuse (``tls_new`` −
  ``tls``), when those arms ran.

Only positive savings become advice (a change that costs more is not advice); an item whose CI
contains 0 stays, marked ``verdict: negligible``. Ranked by ``saving_us``, largest first.

A group pair with a post-quantum hybrid on one side (X25519MLKEM768 against X25519 or P-256) is not
advice to drop the hybrid but its price, kept whatever its sign: ``arms`` is [hybrid, classical],
``saving_us`` what dropping it would save (negative when the hybrid measured cheaper), and the item
carries ``hybrid`` (``hybrid_cost``) — hybrid − classical per new connection (each a full handshake
in ``tls_new`` or ``h2_new``): time to last byte with its CI,
server CPU-ms with its CI (the server probe's, else the sampled local process's; per request is per
handshake there), and the handshake bytes each side sent more (from the variants' probes).
``hybrid_at_peak`` turns it into handshakes/s, extra cores (with the CPU's interval) and extra
bytes/s at the user's peak load; the report page computes the same as the user types.
"""

from __future__ import annotations

import itertools

from portal.lib.stats import costs
from portal.lib.tls.matrix import DIMENSIONS, NEW_CONNECTION_ARMS, REPORT_KEYS, base_arm
from portal.lib.tls.matrix import label as value_label

# What an item's title adds for the arm its sub-arms repeat (``tls_new``, the matrix's first, adds
# nothing): an item on one arm says nothing about another.
WHERE = {
    "tls": " (tls: on warm keep-alive connections)",
    "h2_new": " (h2_new: HTTP/2, a new TLS connection per request)",
    "h2": " (h2: HTTP/2 on warm keep-alive connections)",
}


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
    dim: str, a: str, b: str, pairs: list[tuple[str, str]], inputs: dict, arms: dict, priced: bool = False
) -> dict | None:
    """One item from the matched pairs of one dimension's two values (on one base arm). ``priced``:
    the price of ``a`` over ``b`` (the hybrid's), kept whichever way this run measured it."""
    first = costs.compare(dim, pairs[0][0], pairs[0][1], inputs)
    if first is None or (first["delta"] == 0 and not priced):
        return None
    # Orient as costly − cheap: the saving is positive (a price: a − b, whatever its sign).
    costly_value, cheap_value = (a, b) if first["delta"] > 0 or priced else (b, a)
    if first["delta"] < 0 and not priced:
        first = costs.compare(dim, pairs[0][1], pairs[0][0], inputs)
    signs = [costs.compare(dim, x, y, inputs) for x, y in pairs]
    agree = sum(1 for e in signs if e and (e["delta"] > 0) == (costly_value == a))
    label = value_label(dim, cheap_value)
    title = f"{label[0].upper()}{label[1:]} instead of {value_label(dim, costly_value)}"
    title += WHERE.get(base_arm(pairs[0][0]), "")
    evidence = _evidence(first, arms) + f" The same sign in {agree} of {len(pairs)} matched pair(s)."
    return _item(title, first, arms, evidence, dimension=dim, consistent=[agree, len(pairs)])


# Full-handshake round trips by the matrix's protocol values (portal.lib.stats.wan's model).
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
        or base_arm(item["arms"][1]) not in NEW_CONNECTION_ARMS
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


def is_hybrid(group: str | None) -> bool:
    """A post-quantum hybrid key exchange (an ML-KEM group such as X25519MLKEM768)."""
    return bool(group) and "mlkem" in group.lower()


def _cpu_inputs(inputs: dict[str, dict], probes: dict | None) -> tuple[dict[str, dict], str | None]:
    """The cost inputs with the server CPU to compare: the server probe's when it sampled the arms,
    else the sampled local process's (per round too, for the CI over rounds)."""
    if any(arm.get("server_cpu_ms_per_req") is not None for arm in inputs.values()):
        return inputs, "server_probe"
    local = (probes or {}).get("generator_cpu") or {}
    if not local:
        return inputs, None
    out = {}
    for name, arm in inputs.items():
        rounds = [
            {**r, "server_cpu_ms_per_req": r.get("generator_probe_cpu_ms_per_req")}
            for r in arm.get("rounds") or []
        ]
        cpu = (local.get(name) or {}).get("cpu_ms_per_req")
        out[name] = {**arm, "server_cpu_ms_per_req": cpu, "rounds": rounds}
    return out, "local_process"


def hybrid_cost(
    hybrid_arm: str, classic_arm: str, matrix: list[dict], inputs: dict[str, dict], probes: dict | None = None
) -> dict | None:
    """What the hybrid costs over the classical group, per new connection (a full handshake each):
    ``{"arms", "group", "versus", "ttlb_us", "ttlb_ci95", "ttlb_ci_method", "server_cpu_ms",
    "server_cpu_ci95", "server_cpu_ci_method", "cpu_source", "process", "client_bytes",
    "server_bytes", "samples"}``, each a delta hybrid − classical (negative: the hybrid was cheaper
    in this run)."""
    ttlb = costs.compare("hybrid", hybrid_arm, classic_arm, inputs)
    if ttlb is None:
        return None
    by_arm = {entry["arm"]: entry for entry in matrix}
    mine, theirs = by_arm[hybrid_arm], by_arm[classic_arm]
    cpu_inputs, source = _cpu_inputs(inputs, probes)
    cpu = (
        costs.compare("hybrid", hybrid_arm, classic_arm, cpu_inputs, "server_cpu_ms_per_req")
        if source
        else None
    )

    def more(key: str) -> int | None:
        a, b = (mine.get("negotiated") or {}).get(key), (theirs.get("negotiated") or {}).get(key)
        return a - b if a is not None and b is not None else None

    process = (((probes or {}).get("generator_cpu") or {}).get(hybrid_arm) or {}).get("process")
    return {
        "arms": [hybrid_arm, classic_arm],
        "group": (mine.get("negotiated") or {}).get("group") or mine["variant"].get("group"),
        "versus": (theirs.get("negotiated") or {}).get("group") or theirs["variant"].get("group"),
        "ttlb_us": ttlb["delta"],
        "ttlb_ci95": ttlb["ci95"],
        "ttlb_ci_method": ttlb["ci_method"],
        "server_cpu_ms": cpu["delta"] if cpu else None,
        "server_cpu_ci95": cpu["ci95"] if cpu else None,
        "server_cpu_ci_method": cpu["ci_method"] if cpu else None,
        "cpu_source": source if cpu else None,
        "process": process if source == "local_process" else None,
        "client_bytes": more("client_handshake_bytes"),
        "server_bytes": more("server_handshake_bytes"),
        "samples": ttlb["samples"],
    }


def hybrid_at_peak(hybrid: dict, peak_rps: float, new_share: float) -> dict:
    """The hybrid's price at the user's peak: ``peak_rps`` requests/s of which ``new_share`` (0–1)
    open a new connection (a full handshake). Extra cores = handshakes/s × ΔCPU-ms / 1000, with the
    CPU's interval scaled alike; extra bytes/s = handshakes/s × (Δclient + Δserver bytes). The page
    computes the same in static/js/run.js."""
    if not 0.0 <= new_share <= 1.0 or peak_rps < 0:
        raise ValueError("peak_rps must be ≥ 0 and new_share within 0–1")
    handshakes = peak_rps * new_share
    cpu, ci = hybrid.get("server_cpu_ms"), hybrid.get("server_cpu_ci95")
    sent = [hybrid.get("client_bytes"), hybrid.get("server_bytes")]
    return {
        "handshakes_per_s": handshakes,
        "extra_cores": None if cpu is None else handshakes * cpu / 1000.0,
        "extra_cores_ci95": None if not ci else [handshakes * ci[0] / 1000.0, handshakes * ci[1] / 1000.0],
        "extra_bytes_per_s": None if None in sent else handshakes * sum(sent),
        "extra_ttlb_us_per_new_connection": hybrid["ttlb_us"],
    }


def hybrid_words(hybrid: dict) -> str:
    ci = hybrid["ttlb_ci95"]
    text = (
        f" Per new connection (a full handshake) {hybrid['group']} costs {hybrid['ttlb_us']:+g} µs "
        f"of time to last byte over {hybrid['versus']} ("
        + (f"95% CI {ci[0]:+g}…{ci[1]:+g} µs, {hybrid['ttlb_ci_method']}" if ci else "no CI")
        + ")"
    )
    if hybrid["server_cpu_ms"] is not None:
        cpu_ci = hybrid["server_cpu_ci95"]
        text += f", {hybrid['server_cpu_ms']:+g} server CPU-ms (" + (
            f"95% CI {cpu_ci[0]:+g}…{cpu_ci[1]:+g}, {hybrid['server_cpu_ci_method']}" if cpu_ci else "no CI"
        )
        text += f"; {hybrid['cpu_source'].replace('_', ' ')})"
    if hybrid["client_bytes"] is not None and hybrid["server_bytes"] is not None:
        text += (
            f", and {hybrid['client_bytes']:+d} bytes from the client, "
            f"{hybrid['server_bytes']:+d} from the server"
        )
    return text + "."


def _hybrid_price(item: dict, matrix: list[dict], inputs: dict, probes: dict | None) -> None:
    """A group pair with the hybrid on one side: its price per handshake, not advice to drop it."""
    variants = {entry["arm"]: entry["variant"] for entry in matrix}
    groups = [variants[name].get("group") for name in item["arms"]]
    if item.get("dimension") != "group" or is_hybrid(groups[0]) == is_hybrid(groups[1]):
        return
    hybrid_arm, classic_arm = item["arms"] if is_hybrid(groups[0]) else item["arms"][::-1]
    hybrid = hybrid_cost(hybrid_arm, classic_arm, matrix, inputs, probes)
    if hybrid is None:
        return
    item["hybrid"] = hybrid
    item["title"] = (
        f"What the post-quantum hybrid costs: {value_label('group', variants[hybrid_arm]['group'])} "
        f"against {value_label('group', variants[classic_arm]['group'])}{WHERE.get(base_arm(hybrid_arm), '')}"
    )
    item["evidence"] += hybrid_words(hybrid)


def matrix_advice(
    matrix: list[dict], inputs: dict[str, dict], arms: dict[str, dict], probes: dict | None = None
) -> list[dict]:
    out = []
    variants = {entry["arm"]: entry["variant"] for entry in matrix}
    for base in dict.fromkeys(entry["base_arm"] for entry in matrix):
        entries = [entry for entry in matrix if entry["base_arm"] == base]
        for dim in DIMENSIONS:
            key = REPORT_KEYS[dim]
            # The dimension's values in this run (named groups too), in the matrix's order.
            seen = [v for v in dict.fromkeys(e["variant"].get(key) for e in entries) if v is not None]
            for a, b in itertools.combinations(seen, 2):
                priced = dim == "group" and is_hybrid(a) != is_hybrid(b)
                if priced and is_hybrid(b):
                    a, b = b, a  # noqa: PLW2901 - the hybrid first: its price over the classical group
                pairs = _matrix_pairs(entries, dim, a, b)
                item = _pair_advice(dim, a, b, pairs, inputs, arms, priced) if pairs else None
                if item is not None:
                    _round_trip_caveat(item, variants)
                    _hybrid_price(item, matrix, inputs, probes)
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


def advise(
    matrix: list[dict], inputs: dict[str, dict], arms: dict[str, dict], probes: dict | None = None
) -> list[dict]:
    """The report's ``advice``: ``[{"title", "saving_us", "saving_server_cpu_ms", "ci95",
    "evidence", …}]``, largest measured saving first. ``probes``: the report's ``probes`` (the
    sampled local process's CPU, for the hybrid's price when no server probe ran)."""
    items = matrix_advice(matrix, inputs, arms, probes) + arm_advice(inputs, arms)
    # The hybrid's price stays whatever its sign (a cheaper hybrid in this run is news too).
    items = [i for i in items if i["saving_us"] > 0 or i.get("hybrid")]
    return sorted(items, key=lambda item: item["saving_us"], reverse=True)
