"""Which way a cost points, and how its verdict is said: the one place that knows each derived cost's
natural sign and turns a verdict (``portal.lib.stats.costs.verdict``, a size) and its direction into the
words and colour the pages, the headline, the CSV and the budgets use. Pure functions.

``direction``, from ``delta`` and ``ci95``:

- ``none`` when the interval contains 0, or the delta is 0 (no evidence of a difference either way);
- otherwise the way the cost reads. Every cost's arm is the side that does more work (TLS against
  its control, a full handshake against a resumed one), so an arm worse than its base (slower, fewer
  requests/s, more server CPU: ``WORSE``) is the cost's natural direction (``NATURAL_DIRECTION``:
  ``cost``, but ``saving`` for ``resumption_saving``, whose subject is the resumed base), and an arm
  better than its base the other one.

``unexpected`` is true when a noticeable or significant delta goes the other way: TLS faster than
its control, resumed connections slower than full handshakes. The arm does more work, so such a
delta says the two arms did not measure the same thing (another server, path, cache or proxy): it is
worded "tls faster than plain — check the setup", never as a cost or a saving. A negligible one
stays "negligible".

``evidence.judge_costs`` puts both on each judged cost (``null`` and false when it is not judged).
Reports signed and summaries stored before they were kept get them derived here on reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from portal.lib.stats.costs import COSTS, NEGLIGIBLE, NOTICEABLE, SIGNIFICANT, UNCONFIRMED

COST, SAVING, NONE = "cost", "saving", "none"
# How a cost reads when its arm is worse than its base; any other pair of arms reads as a cost.
NATURAL_DIRECTION = {
    "keepalive_tls": COST,
    "new_connection_tls": COST,
    "handshake": COST,
    "resumption_saving": SAVING,
    "client_certificate": COST,
    "h2_tls": COST,
    # HTTP/3's: what resuming a QUIC session saves (h3_new − h3_resumed) and 0-RTT on top of it
    # (h3_resumed − h3_0rtt).
    "h3_resumption_saving": SAVING,
    "h3_0rtt_saving": SAVING,
}
# Comparisons with no natural direction: HTTP/2 may cost or save against HTTP/1.1 (and TLS + HTTP/2
# against plain HTTP/1.1), so a delta either way is a finding, never "check the setup". They read as a
# cost when the arm is worse and as a saving when it is better.
TWO_SIDED = frozenset(
    {"h2_vs_tls", "h2_vs_plain", "h2_new_vs_tls_new"}
    | {"h3_vs_h2", "h3_vs_tls", "h3_new_vs_h2_new", "h3_new_vs_tls_new"}
)
# Per metric: 1 when a higher value is worse (time, CPU), -1 when a lower one is (throughput).
WORSE = {"rps": -1}
# Per metric: the arm better than its base, "tls faster than plain".
BETTER = {"server_cpu_ms_per_req": "lighter on server CPU"}
ARMS = {name: (arm, base) for name, arm, base in COSTS}


def direction(name: str, metric: str, delta: float | None, ci95: Sequence[float] | None) -> str:
    """``cost``, ``saving`` or ``none`` (module docstring)."""
    if not delta or (ci95 is not None and ci95[0] <= 0 <= ci95[1]):
        return NONE
    arm_worse = (delta > 0) == (WORSE.get(metric, 1) > 0)
    natural = NATURAL_DIRECTION.get(name, COST)
    if arm_worse:
        return natural
    return SAVING if natural == COST else COST


def unexpected(name: str, way: str | None, verdict: str | None) -> bool:
    """True when a noticeable or significant delta goes against the cost's natural direction."""
    if name in TWO_SIDED:
        return False
    against = way in (COST, SAVING) and way != NATURAL_DIRECTION.get(name, COST)
    return against and verdict in (NOTICEABLE, SIGNIFICANT)


def sign(cost: dict) -> dict:
    """``{"direction", "unexpected"}`` of a cost entry (``portal.lib.stats.costs``) with its verdict."""
    name = cost.get("name") or ""
    way = direction(name, cost.get("metric") or "ttlb_p50_us", cost.get("delta"), cost.get("ci95"))
    return {"direction": way, "unexpected": unexpected(name, way, cost.get("verdict"))}


def verdict_words(cost: dict) -> dict:
    """How one cost's verdict is said and coloured, wherever it is shown: ``{"label", "tone",
    "title", "direction", "unexpected"}``. ``tone`` names the colour (CSS ``verdict-<tone>``):
    ``negligible``, ``noticeable`` or ``significant`` for a cost, ``saving`` for an expected saving,
    ``unexpected`` for "tls faster than plain — check the setup", ``none`` when not judged or
    unconfirmed (no interval: ``costs.UNCONFIRMED``, the label "unconfirmed" with the reason as its
    title).

    Entries stored before ``direction`` was kept (signed reports; run summaries, which have no
    ``metric``, ``arm`` or ``base``: the TTLB median and the cost's own arms) get it derived."""
    name, word = cost.get("name") or "", cost.get("verdict")
    if "ci95" in cost and not cost["ci95"]:
        word = None  # stored before a cost without an interval lost its verdict: none is said now
    if word is None:
        why, label = cost.get("not_judged") or "", "not judged"
        if not why and (cost.get("unconfirmed") or not cost.get("ci95")):
            why, label = cost.get("unconfirmed") or UNCONFIRMED, "unconfirmed"
        return {"label": label, "tone": "none", "title": why, "direction": None, "unexpected": False}
    metric = cost.get("metric") or "ttlb_p50_us"
    way = cost.get("direction") or direction(name, metric, cost.get("delta"), cost.get("ci95"))
    odd = unexpected(name, way, word)
    arm, base = ARMS.get(name, ("the arm", "its base"))
    arm, base = cost.get("arm") or arm, cost.get("base") or base
    out = {"label": word, "tone": word, "title": "", "direction": way, "unexpected": odd}
    if way == NONE:
        out["title"] = "No evidence of a difference either way" + (
            ": the 95% interval contains 0." if cost.get("ci95") else "."
        )
    elif odd:
        better = BETTER.get(metric, "faster")
        out["label"], out["tone"] = f"{arm} {better} than {base} — check the setup", "unexpected"
        out["title"] = (
            f"{arm} does more work than {base}, so it should not be {better}: the two arms probably "
            "did not measure the same thing (another server, path, cache or proxy)."
        )
    elif way == SAVING and word != NEGLIGIBLE:
        out["label"], out["tone"] = f"{word} saving", "saving"
    return out
