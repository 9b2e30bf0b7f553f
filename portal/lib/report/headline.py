"""The report's headline: the answer in one sentence, worded from the judged costs
(``portal.lib.stats.costs``, ``portal.lib.report.evidence``). Pure functions.

Each ``ttlb_p50_us`` cost makes one clause, in ``COSTS`` order: its change with the verdict, Δ% and
95% interval, and the checks that warned about its arms; a cost that was not judged says so and why,
without its number. The clause follows the verdict's direction (``verdicts.verdict_words``): a cost
"adds", an interval that contains 0 "changes … by", and a delta against the cost's nature (TLS faster
than its control, resumption slower than a full handshake) says so and "check the setup", without a
verdict word. A cost without an interval states its change and "unconfirmed", never a verdict word
(``costs.UNCONFIRMED``). ``new_connection_tls`` (``tls_new`` − ``plain``) is left out when ``handshake``
(``tls_new`` − ``plain_new``) is there: the handshake alone is the sharper answer. Then, as short
sentences: the hint that ``plain_new`` isolates the handshake (when only the new-connection cost
could be given), and once why a stated cost is unconfirmed (``NO_INTERVAL``).
"""

from __future__ import annotations

from portal.lib.stats.costs import UNCONFIRMED
from portal.lib.stats.verdicts import ARMS, COST, NONE, SAVING, TWO_SIDED, verdict_words

COST_WORDS = {
    "keepalive_tls": "TLS on warm (keep-alive) connections",
    "new_connection_tls": "a new TLS connection per request (TCP connect included)",
    "handshake": "a full TLS handshake per request",
    "resumption_saving": "session resumption",
    "h2_vs_tls": "HTTP/2 on warm TLS connections (h2 vs tls)",
    "h2_vs_plain": "TLS with HTTP/2 against plain HTTP/1.1 (h2 vs plain)",
    "h2_new_vs_tls_new": "HTTP/2 on a new TLS connection per request (h2_new vs tls_new)",
    "h2_tls": "TLS under HTTP/2 (h2 vs h2c)",
    "client_certificate": "a client certificate per new connection (tls_mtls vs tls_new)",
    "h3_vs_h2": "HTTP/3 on warm connections against HTTP/2 (h3 vs h2)",
    "h3_vs_tls": "HTTP/3 on warm connections against HTTP/1.1 over TLS (h3 vs tls)",
    "h3_new_vs_h2_new": "HTTP/3 on a new connection per request against HTTP/2 (h3_new vs h2_new)",
    "h3_new_vs_tls_new": "HTTP/3 per new connection against HTTP/1.1 over TLS (h3_new vs tls_new)",
}
# Costs read as savings (arm − base positive: the base is quicker): what is saved, and per what.
SAVING_WORDS = {
    "resumption_saving": ("session resumption", "resumed connections", "new connection"),
    "h3_resumption_saving": ("QUIC session resumption", "resumed QUIC connections", "new QUIC connection"),
    "h3_0rtt_saving": ("0-RTT", "0-RTT requests", "resumed QUIC connection"),
}
HANDSHAKE_HINT = "Adding the plain_new arm isolates the handshake from the TCP connect."
NO_INTERVAL = f"Unconfirmed: {UNCONFIRMED}."


def _ms(us: float) -> str:
    return f"{us / 1000:+.2f} ms"


def _qualifiers(cost: dict, word: str | None = None) -> str:
    """(verdict or "unconfirmed", Δ%, 95% CI when there is one; warnings) of a cost; ``word`` in place of the
    verdict's words (``verdicts.verdict_words``), "" for none."""
    parts = [verdict_words(cost)["label"] if word is None else word]
    if cost["delta_pct"] is not None and cost["name"] not in SAVING_WORDS:
        parts.append(f"{cost['delta_pct']:+.0f}%")
    if cost["ci95"]:
        parts.append(f"95% CI {cost['ci95'][0] / 1000:+.2f} … {cost['ci95'][1] / 1000:+.2f} ms")
    text = ", ".join(part for part in parts if part)
    warned = list(dict.fromkeys(w["check"] for w in cost.get("warnings") or []))
    if warned:
        text += f"; warnings: {', '.join(warned)}"
    return f"({text})"


def _clause(cost: dict, costs: list[dict]) -> str:
    words = COST_WORDS.get(cost["name"], cost["name"].replace("_", " "))
    if cost.get("not_judged"):
        return f"{words}: not judged — {cost['not_judged']}"
    said = verdict_words(cost)
    if cost["name"] in SAVING_WORDS:
        return _saving_clause(cost, said)
    if said["label"] == "unconfirmed":  # the size measured, no claim about it
        measured = f"{_ms(cost['delta'])} median time to last byte{_cpu(cost, costs)}"
        return f"{words}: {measured} {_qualifiers(cost)}"
    if said["unexpected"]:
        # TLS faster than its control: a sign the arms measured different things, not a saving.
        arm, base = ARMS.get(cost["name"], ("the arm", "its base"))
        what = (
            f"{words}: {cost.get('arm', arm)} answered {-cost['delta'] / 1000:.2f} ms faster than "
            f"{cost.get('base', base)} at the median time to last byte — check the setup"
        )
        return f"{what} {_qualifiers(cost, '')}"
    if said["direction"] == COST:
        what = f"{words} adds {_ms(cost['delta'])} median time to last byte"
    elif said["direction"] == SAVING and cost["name"] in TWO_SIDED:
        what = f"{words} saves {-cost['delta'] / 1000:.2f} ms median time to last byte"
    else:
        what = f"{words} changes the median time to last byte by {_ms(cost['delta'])}"
    return f"{what}{_cpu(cost, costs)} {_qualifiers(cost)}"


def _saving_clause(cost: dict, said: dict) -> str:
    """A saving's clause: "session resumption saves 1.20 ms per new connection (…)"."""
    what, second, per = SAVING_WORDS[cost["name"]]
    if said["label"] == "unconfirmed":
        return f"{what}: {_ms(-cost['delta'])} per {per} {_qualifiers(cost)}"
    if said["direction"] == SAVING:
        return f"{what} saves {cost['delta'] / 1000:.2f} ms per {per} {_qualifiers(cost)}"
    if said["direction"] == NONE:
        return f"{what} makes no clear difference per {per}: {_ms(cost['delta'])} saved {_qualifiers(cost)}"
    longer = f"{second} took {-cost['delta'] / 1000:.2f} ms longer"
    if said["unexpected"]:
        return f"{what} saves nothing here: {longer} — check the setup {_qualifiers(cost, '')}"
    return f"{what} saves nothing here: {longer} {_qualifiers(cost)}"


def _cpu(cost: dict, costs: list[dict]) -> str:
    """ " and +0.600 server CPU-ms per request" when the server CPU of the cost's arms was probed."""
    cpu = next(
        (c for c in costs if c["name"] == cost["name"] and c["metric"] == "server_cpu_ms_per_req"),
        None,
    )
    return "" if cpu is None else f" and {cpu['delta']:+.3f} server CPU-ms per request"


def headline(costs: list[dict]) -> str | None:
    """The answer, from the TTLB-median costs with their intervals, verdicts and warnings."""
    names = {cost["name"] for cost in costs}
    stated = [
        cost
        for cost in costs
        if cost["metric"] == "ttlb_p50_us"
        and not (cost["name"] == "new_connection_tls" and "handshake" in names)
    ]
    if not stated:
        return None
    text = "; ".join(_clause(cost, costs) for cost in stated)
    sentences = [text[0].upper() + text[1:] + "."]
    if "new_connection_tls" in names and "handshake" not in names:
        sentences.append(HANDSHAKE_HINT)
    if any(verdict_words(cost)["label"] == "unconfirmed" for cost in stated):
        sentences.append(NO_INTERVAL)
    return " ".join(sentences)
