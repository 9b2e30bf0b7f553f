"""The answer table: one line per question a run can answer, first on its report (the page, the
shared page, the print, the JSON's ``answers``, the CSV). Pure functions over the report's parts.

Each row says one thing in plain words: the question, the measured value, its 95% interval, the
verdict (never without an interval: ``costs.UNCONFIRMED``) and the server CPU per request where a
probe measured it. Rows, in order:

- ``cost``: one per declared question (``QUESTIONS``) whose cost the report computed (its
  ``ttlb_p50_us`` entry), or whose two arms the run asked for but could not measure (refused,
  invalid, not reached: the row says why, ``not_measured``). A question is declared once, here: a
  new cost (HTTP/3's, already declared) gets its row with no template code;
- ``matrix``: the TLS configuration matrix's dimensions, one per pair of values measured on one arm
  (``portal.lib.tls.advice``: "ECDSA certificate instead of RSA certificate"), as a saving;
- ``hybrid``: the post-quantum hybrid's price over a classical group per new connection (time to
  last byte), per handshake (server CPU) and its extra handshake bytes;
- ``cores``: the extra server cores TLS needs at ``projection.DEFAULT_PEAK_RPS`` with
  ``projection.DEFAULT_NEW_SHARE`` of the requests on new connections, with its interval
  (``portal.lib.stats.projection.cores_interval``); the cost projection below recomputes it for other loads.

Every row has the same fields (``row``) and reads the same way: its cells as the page prints them
(``shown``) and the row in one sentence for the CSV, the CLI and callbacks (``text``), so a new kind
of question needs no template code.

``unanswered`` says why a run answered none of the questions it asked (every requested cost
refused, invalid or not reached): such a run ends ``incomplete``, not ``succeeded``.
"""

from __future__ import annotations

from dataclasses import dataclass

from portal.lib.report import metrics
from portal.lib.stats import projection, verdicts
from portal.lib.stats.costs import UNCONFIRMED, compare
from portal.lib.tls.matrix import REPORT_KEYS, base_arm

TTLB = "ttlb_p50_us"
CPU = "server_cpu_ms_per_req"


@dataclass(frozen=True)
class Question:
    """A question the answer table may hold: ``cost`` is the report's cost name (its arm and base
    come from the cost, ``portal.lib.stats.costs.COSTS``), ``words`` the question in plain words."""

    cost: str
    words: str
    arms: tuple[str, str]


QUESTIONS = (
    Question("keepalive_tls", "TLS on warm (keep-alive) connections", ("tls", "plain")),
    Question("new_connection_tls", "A new TLS connection per request, TCP included", ("tls_new", "plain")),
    Question("handshake", "The full TLS handshake per request", ("tls_new", "plain_new")),
    Question("resumption_saving", "What session resumption saves", ("tls_new", "tls_resumed")),
    Question("client_certificate", "A client certificate (mutual TLS)", ("tls_mtls", "tls_new")),
    Question("h2_vs_tls", "HTTP/2 instead of HTTP/1.1 on warm TLS connections", ("h2", "tls")),
    Question("h2_new_vs_tls_new", "HTTP/2 instead of HTTP/1.1, new TLS connections", ("h2_new", "tls_new")),
    Question("h2_vs_plain", "TLS with HTTP/2 against plain HTTP/1.1", ("h2", "plain")),
    Question("h2_tls", "TLS under HTTP/2 (h2 against h2c)", ("h2", "h2c")),
    # HTTP/3 (QUIC): against HTTP/2 and HTTP/1.1 over TLS, warm and new; resumption and 0-RTT as savings.
    Question("h3_vs_h2", "HTTP/3 instead of HTTP/2 on warm connections", ("h3", "h2")),
    Question("h3_vs_tls", "HTTP/3 instead of HTTP/1.1 over TLS on warm connections", ("h3", "tls")),
    Question("h3_new_vs_h2_new", "HTTP/3 instead of HTTP/2 on a new connection", ("h3_new", "h2_new")),
    Question("h3_new_vs_tls_new", "HTTP/3 instead of HTTP/1.1 on a new connection", ("h3_new", "tls_new")),
    Question("h3_resumption_saving", "What resuming a QUIC session saves", ("h3_new", "h3_resumed")),
    Question("h3_0rtt_saving", "What 0-RTT saves on a resumed HTTP/3 connection", ("h3_resumed", "h3_0rtt")),
)  # fmt: skip
# A cost's name in words (pages, lists, compare): declared once, by its question.
WORDS = {question.cost: question.words for question in QUESTIONS}


# How a row reads: its fields, its cells (``shown``) and its sentence (``text``).


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({value:+.0f}%)"


def cpu_text(value: float | None, signed: bool = True) -> str:
    """CPU-ms to three significant digits: ``+0.0312``, ``2.24`` (never ``2.241767``)."""
    if value is None:
        return "—"
    text = f"{value:.3g}" if abs(value) >= 1e-4 or value == 0 else f"{value:.1e}"
    return ("+" if signed and value > 0 else "") + text


def _cpu_cell(cpu: dict | None) -> str:
    if not cpu:
        return "—"
    ci = cpu.get("ci95")
    shown = f"{cpu_text(cpu['value'])} ms"
    return shown + (f" ({cpu_text(ci[0])} … {cpu_text(ci[1])})" if ci else " (unconfirmed)")


def verdict_fields(cost: dict) -> dict:
    """A cost's verdict as a row's fields: none without an interval, its words, tone and direction."""
    said = verdicts.verdict_words(cost)
    return {
        "verdict": cost.get("verdict") if cost.get("ci95") else None,
        "verdict_label": said["label"],
        "tone": said["tone"],
        "verdict_title": said["title"],
        "direction": said["direction"],
    }


def row(key: str, kind: str, question: str, **fields) -> dict:
    row = {
        "key": key,
        "kind": kind,
        "question": question,
        "arms": None,
        "metric": TTLB,
        "value": None,
        "value_pct": None,
        "ci95": None,
        "ci_method": "none",
        "samples": None,
        "verdict": None,
        "verdict_label": "",
        "tone": "none",
        "verdict_title": "",
        "direction": None,
        "unconfirmed": None,
        "not_judged": None,
        "not_measured": None,
        "why_not": None,
        "server_cpu": None,
        "extra": None,
    }
    row.update(fields)
    row["shown"] = _shown(row)
    row["text"] = _text(row)
    return row


def _shown(row: dict) -> dict:
    """The row's cells as the page prints them."""
    if row["not_measured"]:
        return {"answer": "not measured", "interval": "—", "verdict": "", "cpu": "—"}
    if row["metric"] == "cores":
        answer = f"{row['value']:+.2f} cores"
        ci = row["ci95"]
        interval = f"{ci[0]:+.2f} … {ci[1]:+.2f} cores" if ci else "—"
    else:
        answer = metrics.with_unit(row["value"], TTLB, signed=True) + _pct(row["value_pct"])
        interval = metrics.interval(row["ci95"], TTLB)
    extra = row.get("extra") or {}
    if extra.get("bytes") is not None:
        answer += f", {extra['bytes']:+,} bytes"
    return {
        "answer": answer,
        "interval": interval,
        "verdict": row["verdict_label"],
        "cpu": _cpu_cell(row["server_cpu"]),
    }


def _text(row: dict) -> str:
    """The row in one sentence (CSV, CLI, callbacks)."""
    if row["not_measured"]:
        return f"{row['question']}: not measured — {row['why_not'] or row['not_measured']}"
    shown = row["shown"]
    text = f"{row['question']}: {shown['answer']}"
    text += f", 95% CI {shown['interval']}" if row["ci95"] else ""
    why = row["not_judged"] or row["unconfirmed"]
    text += f" — {shown['verdict']}" + (f": {why}" if why else "")
    if row["server_cpu"]:
        text += f"; server CPU {shown['cpu']} per {row['server_cpu'].get('per', 'request')}"
    return text


def two_sided(word: str | None, delta: float | None) -> dict:
    """A verdict on a comparison either way can go (a matrix pair, the hybrid's price): a cost when
    the first is dearer, a saving when it is cheaper; unconfirmed without an interval."""
    if word is None:
        return {"verdict": None, "verdict_label": "unconfirmed", "tone": "none", "verdict_title": UNCONFIRMED}
    if word == "negligible" or not delta:
        return {"verdict": word, "verdict_label": word, "tone": word, "verdict_title": ""}
    if delta < 0:
        return {"verdict": word, "verdict_label": f"{word} saving", "tone": "saving", "verdict_title": ""}
    return {"verdict": word, "verdict_label": word, "tone": word, "verdict_title": ""}


# The rows, chosen from the report's parts.


def _cpu_source(inputs: dict[str, dict], probes: dict | None) -> str | None:
    """Whose CPU the rows show: the server probe's when it sampled any arm, else the sampled local
    process's (a server on the generator host, e.g. the demo's target)."""
    if any(arm.get(CPU) is not None for arm in inputs.values()):
        return "server_probe"
    return "local_process" if (probes or {}).get("generator_cpu") else None


def _cpu(
    arm: str, base: str, cpu_inputs: dict | None, source: str | None, per: str = "request"
) -> dict | None:
    entry = compare("cpu", arm, base, cpu_inputs, CPU) if cpu_inputs else None
    if entry is None:
        return None
    return {
        "value": entry["delta"],
        "ci95": entry["ci95"],
        "ci_method": entry["ci_method"],
        "source": source,
        "per": per,
    }


def _not_measured(question: Question, missing: dict[str, tuple[str, str]]) -> dict:
    """The row of an asked question whose cost could not be computed: why in short ("plain arm
    refused") and in full ("plain arm refused: port 8443 speaks TLS …")."""
    gone = [arm for arm in question.arms if arm in missing]
    short = "; ".join(f"{arm} arm {missing[arm][0]}" for arm in gone) or "no samples"
    full = "; ".join(f"{arm} arm {': '.join(part for part in missing[arm] if part)}" for arm in gone)
    return row(
        question.cost,
        "cost",
        question.words,
        arms=list(question.arms),
        not_measured=short,
        why_not=full or short,
    )


def cost_rows(config: dict, costs: list[dict], missing: dict[str, tuple[str, str]], cpu: tuple) -> list[dict]:
    """A row per declared question the report has a cost for, or whose arms were asked for and
    not measured (``missing``: arm → why, ``missing_arms``)."""
    asked = {arm.get("name") for arm in config.get("arms") or []}
    by_name = {c["name"]: c for c in costs if c["metric"] == TTLB}
    rows = []
    for q in QUESTIONS:
        cost = by_name.get(q.cost)
        if cost is None:
            if set(q.arms) <= asked:
                rows.append(_not_measured(q, missing))
            continue
        rows.append(
            row(
                q.cost,
                "cost",
                q.words,
                arms=[cost["arm"], cost["base"]],
                value=cost["delta"],
                value_pct=cost["delta_pct"],
                ci95=cost["ci95"],
                ci_method=cost["ci_method"],
                samples=cost["samples"],
                unconfirmed=None if cost.get("not_judged") or cost["ci95"] else UNCONFIRMED,
                not_judged=cost.get("not_judged"),
                server_cpu=_cpu(cost["arm"], cost["base"], *cpu),
                **verdict_fields(cost),
            )
        )
    return rows


# The matrix's dimensions and values as the answer table names them (short: one line per question).
DIMENSION_WORDS = {
    "protocol": "Protocol",
    "group": "Key exchange",
    "cert": "Certificate",
    "resumption": "Resumption",
    "client_cert": "Client certificate",
}
VALUE_WORDS = {
    "tls1.2": "TLS 1.2",
    "tls1.3": "TLS 1.3",
    "x25519": "X25519",
    "p256": "P-256",
    "x25519mlkem768": "X25519MLKEM768",
    "rsa": "RSA",
    "ecdsa": "ECDSA",
    "ed25519": "Ed25519",
    "ticket": "by session ticket",
    "session_id": "by session ID",
}
NONE_WORDS = {"resumption": "a full handshake", "client_cert": "none"}
WHERE = {
    "tls_new": "per new connection",
    "h2_new": "per new HTTP/2 connection",
    "tls": "on warm connections",
    "h2": "on warm HTTP/2 connections",
    "h3_new": "per new QUIC connection",
}


def _value(dim: str, value: str | None) -> str:
    if value in (None, "none"):
        return NONE_WORDS.get(dim, "the default")
    return VALUE_WORDS.get(value, value)


def matrix_question(dim: str, cheap: str | None, costly: str | None, arm: str) -> str:
    """The question of a matrix pair, e.g. "Certificate: ECDSA instead of RSA, per new connection"."""
    where = WHERE.get(base_arm(arm), f"on {base_arm(arm)}")
    return f"{DIMENSION_WORDS.get(dim, dim)}: {_value(dim, cheap)} instead of {_value(dim, costly)}, {where}"


def matrix_rows(advice: list[dict], entries: list[dict], cpu: tuple) -> list[dict]:
    """The matrix's dimensions (advice items on sub-arms, cheaper instead of dearer) and the
    hybrid's price, in advice order. ``entries``: the report's ``matrix`` (each sub-arm's variant)."""
    variants = {entry["arm"]: entry.get("variant") or {} for entry in entries}
    rows = []
    for item in advice:
        dim = item.get("dimension")
        if not dim:
            continue
        costly, cheap = item["arms"]
        key = REPORT_KEYS.get(dim, dim)
        values = [variants.get(name, {}).get(key) for name in (cheap, costly)]
        if item.get("hybrid"):
            where = WHERE.get(base_arm(costly), f"on {base_arm(costly)}")
            question = f"Post-quantum {_value(dim, values[1])} instead of {_value(dim, values[0])}, {where}"
            rows.append(hybrid_row(item, question))
            continue
        ci = item.get("ci95")
        rows.append(
            row(
                f"matrix:{cheap}:{costly}",
                "matrix",
                matrix_question(dim, *values, cheap),
                arms=[cheap, costly],
                value=-item["saving_us"],
                value_pct=None if item.get("saving_pct") is None else -item["saving_pct"],
                ci95=[-ci[1], -ci[0]] if ci else None,
                ci_method=item.get("ci_method") or "none",
                unconfirmed=None if ci else UNCONFIRMED,
                server_cpu=_cpu(cheap, costly, *cpu),
                **two_sided(item.get("verdict") if ci else None, -item["saving_us"]),
            )
        )
    return rows


def hybrid_row(item: dict, question: str) -> dict:
    """The hybrid's price per new connection (TTLB), per handshake (CPU) and in bytes."""
    h = item["hybrid"]
    sent = [h.get("client_bytes"), h.get("server_bytes")]
    cpu = None
    if h.get("server_cpu_ms") is not None:
        cpu = {
            "value": h["server_cpu_ms"],
            "ci95": h.get("server_cpu_ci95"),
            "source": h.get("cpu_source"),
            "per": "handshake",
        }
    return row(
        f"hybrid:{h['arms'][0]}:{h['arms'][1]}",
        "hybrid",
        question,
        arms=list(h["arms"]),
        value=h["ttlb_us"],
        value_pct=item.get("saving_pct"),
        ci95=h["ttlb_ci95"],
        ci_method=h.get("ttlb_ci_method") or "none",
        samples=h.get("samples"),
        unconfirmed=None if h["ttlb_ci95"] else UNCONFIRMED,
        server_cpu=cpu,
        extra={
            "client_bytes": sent[0],
            "server_bytes": sent[1],
            "bytes": None if None in sent else sum(sent),
        },
        **two_sided(item.get("verdict") if h["ttlb_ci95"] else None, h["ttlb_us"]),
    )


def cores_row(proj: dict | None) -> dict | None:
    """The extra cores TLS needs at the default peak, with its interval (``projection``)."""
    if not proj:
        return None
    peak, share = projection.DEFAULT_PEAK_RPS, projection.DEFAULT_NEW_SHARE
    cores = projection.project_cores(proj, peak, share)
    ci = projection.cores_interval(proj, peak, share)
    per_req = (1 - share) * proj["keepalive_ms_per_req"] + share * proj["new_ms_per_req"]
    per_ci = None
    if ci:
        per_ci = [c * 1000.0 / peak for c in ci]
    return row(
        "cores",
        "cores",
        f"Extra server cores for TLS at {peak:,.0f} req/s, {share:.0%} on new connections",
        arms=["tls", "plain", "tls_new", proj["new_base"]],
        metric="cores",
        value=round(cores, 6),
        ci95=[round(c, 6) for c in ci] if ci else None,
        ci_method=proj.get("keepalive_ci_method") or "none",
        verdict_label="projection" if ci else "unconfirmed",
        verdict_title="" if ci else UNCONFIRMED,
        unconfirmed=None if ci else UNCONFIRMED,
        server_cpu={"value": round(per_req, 6), "ci95": per_ci, "source": proj["source"], "per": "request"},
    )


def answer_rows(
    config: dict,
    costs: list[dict],
    advice: list[dict],
    proj: dict | None,
    missing: dict[str, tuple[str, str]],
    inputs: dict[str, dict],
    probes: dict | None = None,
    entries: list[dict] | None = None,
) -> list[dict]:
    """The report's ``answers`` (module docstring). ``missing``: why an asked-for arm has no cost
    (refused, invalid, not reached); ``inputs``: the cost inputs (CPU per arm and round)."""
    source = _cpu_source(inputs, probes)
    cpu = (projection.cpu_inputs(inputs, source, probes) if source else None, source)
    rows = cost_rows(config, costs, missing, cpu) + matrix_rows(advice, entries or [], cpu)
    cores = cores_row(proj)
    return rows + ([cores] if cores else [])


def missing_arms(
    config: dict, arms: dict[str, dict], refused: list[dict] | None, invalid: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """Why each asked-for arm gives no cost, in short and in full: ``("refused", reason)``,
    ``("is invalid", why)``, ``("was not measured", "")``."""
    out: dict[str, tuple[str, str]] = {}
    for entry in refused or []:
        # The engine's reason starts "<arm> refused: " (said once here).
        out[entry["arm"]] = ("refused", entry["reason"].removeprefix(entry["arm"] + " refused: "))
    for name, why in invalid.items():
        out.setdefault(name, ("is invalid", why))
    for arm in config.get("arms") or []:
        name = arm.get("name")
        if name not in arms or not (arms[name].get("ttlb_us") or {}).get("count"):
            out.setdefault(name, ("was not measured", ""))
    return out


def unanswered(rows: list[dict]) -> str | None:
    """Why a run answered none of the questions it asked ("no cost could be computed — plain arm
    refused: …"), or None when it answered one (or asked none of the declared questions)."""
    asked = [r for r in rows if r["kind"] == "cost"]
    if not asked or any(r["kind"] in ("matrix", "hybrid") for r in rows):
        return None
    if any(not r["not_measured"] and not _voided(r) for r in asked):
        return None
    why = dict.fromkeys(r["why_not"] or r["not_judged"] for r in asked)
    return "no cost could be computed — " + "; ".join(why)


def _voided(row: dict) -> bool:
    """A cost withheld because one of its arms is invalid: measured, but not of the page."""
    return bool(row["not_judged"]) and " is invalid: " in row["not_judged"]
