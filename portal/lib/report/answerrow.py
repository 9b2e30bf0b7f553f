"""One row of the answer table (``portal.lib.report.answers``): its fields, and its cells and sentence in
words (``shown``, ``text``). Pure functions: the table's content is chosen in ``answers``, how a
row reads is here, so a new kind of question needs no template code."""

from __future__ import annotations

from portal.lib.report import metrics
from portal.lib.stats import verdicts
from portal.lib.stats.costs import UNCONFIRMED

TTLB = "ttlb_p50_us"


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


def verdict(cost: dict) -> dict:
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
