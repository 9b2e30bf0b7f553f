"""No claim without its evidence: costs judged against the validity checks of their own arms, and
the run's status as a reader should see it. Pure functions over the report's parts.

- ``judge_costs``: a cost one of whose arms is invalid, or about whose arms a check found a failure,
  gets no verdict (``verdict: null``, ``direction: null``) and says why in ``not_judged``; a cost
  without an interval has no verdict either (``costs.UNCONFIRMED`` in its ``unconfirmed``) nor a
  direction: no verdict without its interval; warnings
  about its arms go beside its verdict in ``warnings``. A judged cost gets its ``direction`` and
  ``unexpected`` (``portal.lib.stats.verdicts``). A finding is about a cost when every arm it
  names is one of the cost's two arms: ``tls_sessions`` failing ``tls_resumed`` voids
  ``resumption_saving``, not ``keepalive_tls``; ``same_content`` failing ``tls`` vs ``plain`` voids
  ``keepalive_tls`` only.
- ``check_counts``: how many checks passed, warned, failed and could not judge (``run.checks``).
- ``status_badge``: "with 2 failed checks and 1 warning" and its level, for the run page, the list
  and the compare page alike.
- ``failure_reason`` and ``status_text``: a failed (or incomplete) run says why first, then what its
  checks found: "failed: no arm measured the page: 404 × 1,200 on every arm · 3 invalid arms (…)
  and 1 failed check", "incomplete: no cost could be computed — plain arm refused: …" (the pages
  put the same parts in their own markup; ``error_detail`` is what its error says beyond that line).
- ``too_short_for_intervals``: whether a run of that duration and rounds can give its costs a 95%
  interval at all (the run form warns before submitting).
"""

from __future__ import annotations

import math

from portal.lib.stats import verdicts
from portal.lib.stats.costs import MIN_ROUNDS, MIN_SECONDS
from portal.lib.tls import tlswords
from portal.lib.validity.verdict import FAIL, STATUSES, WARN

OK, AMBER, RED = "ok", "warn", "bad"
# Statuses whose reason is said right after the word: "failed: …", "incomplete: …".
WITH_REASON = ("failed", "incomplete")


def judge_costs(costs: list[dict], checks: list[dict], invalid_arms: dict[str, str]) -> list[dict]:
    """Each cost with ``verdict`` and ``direction`` (null when not judged), ``not_judged`` (why, or
    null) and ``warnings`` (``[{"check", "reason"}]``)."""
    out = []
    for cost in costs:
        pair = {cost["arm"], cost["base"]}
        failed = [
            f"{arm} is invalid: {invalid_arms[arm]}"
            for arm in (cost["arm"], cost["base"])
            if arm in invalid_arms
        ]
        warnings = []
        for check in checks:
            for item in check.get("findings") or []:
                if not item["arms"] or not set(item["arms"]) <= pair:
                    continue
                if item["status"] == FAIL:
                    failed.append(f"{item['reason']} ({check['check']})")
                elif item["status"] == WARN:
                    warnings.append({"check": check["check"], "reason": item["reason"]})
        judged = {
            **cost,
            **verdicts.sign(cost),
            "not_judged": "; ".join(failed) or None,
            "warnings": warnings,
        }
        if failed or judged.get("unconfirmed"):  # no claim: neither its size nor its direction
            judged.update(verdict=None, direction=None, unexpected=False)
        out.append(judged)
    return out


def check_counts(checks: list[dict]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for check in checks:
        counts[check["status"]] = counts.get(check["status"], 0) + 1
    return counts


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def status_badge(status: str, counts: dict | None, invalid_arms: list[str] | None = None) -> dict | None:
    """What to say after a finished run's status: ``{"label": "with 1 invalid arm, 2 failed checks and
    1 warning", "level": "bad"|"warn"|"ok", "title"}``; None while the run has not ended or nothing
    was judged (no arms: not "all 0 checks passed" beside a run its preflight stopped)."""
    if status in ("queued", "running") or not counts or not any(counts.values()):
        return None
    invalid = list(invalid_arms or [])
    parts = []
    if invalid:
        parts.append(f"{_plural(len(invalid), 'invalid arm')} ({', '.join(invalid)})")
    if counts.get("fail"):
        parts.append(_plural(counts["fail"], "failed check"))
    if counts.get("warn"):
        parts.append(_plural(counts["warn"], "warning"))
    skipped = f", {counts['skip']} not judged" if counts.get("skip") else ""
    passed, warned, failed = counts.get("pass", 0), counts.get("warn", 0), counts.get("fail", 0)
    title = f"Validity checks: {passed} passed, {warned} warned, {failed} failed{skipped}."
    if not parts:
        label = f"{passed} checks passed{skipped}" if skipped else f"all {passed} checks passed"
        return {"label": label, "level": OK, "title": title}
    label = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    level = RED if invalid or counts.get("fail") else AMBER
    # A failed run's badge follows its reason ("failed: … · 1 failed check"), not the word "failed".
    return {"label": label if status in WITH_REASON else f"with {label}", "level": level, "title": title}


def summary_badge(status: str, summary: dict | None) -> dict | None:
    """``status_badge`` from a run's stored summary; summaries written before ``checks`` was kept
    carry each check's status under ``validity``."""
    summary = summary or {}
    counts = summary.get("checks")
    if counts is None and summary.get("validity"):
        counts = check_counts([{"status": s} for s in summary["validity"].values()])
    return status_badge(status, counts, summary.get("invalid_arms"))


def failure_reason(status: str, error: str | None) -> str:
    """Why a failed (or incomplete) run ended so, said right after "failed: ": the first line of its
    error (the lines after it are detail: an engine's last output), without its closing full stop,
    its first word in lower case unless it is an acronym ("Timed out after 300 s" → "timed out after
    300 s"). "" for any other status, or a failed run without a reason."""
    if status not in WITH_REASON:
        return ""
    line = tlswords.reword(_first_line(error)).removesuffix(".")
    word = line.split(" ", 1)[0]
    if len(word) > 1 and word[0].isupper() and word[1:].islower():
        line = line[0].lower() + line[1:]
    return line


def status_text(status: str, error: str | None, badge: dict | None) -> str:
    """The status line in words (the CLI, the API's ``status_line``): "succeeded with 1 invalid arm
    (tls)", "failed: no arm measured the page: 404 × 1,200 on every arm · 9 checks passed, 3 not
    judged". ``badge``: ``status_badge`` of the run (None: nothing judged)."""
    reason = failure_reason(status, error)
    said = f"{status}: {reason}" if reason else status
    if not badge:
        return said
    return f"{said} · {badge['label']}" if status in WITH_REASON else f"{said} {badge['label']}"


def _first_line(error: str | None) -> str:
    return next((line.strip() for line in (error or "").splitlines() if line.strip()), "")


def error_detail(status: str, error: str | None) -> str:
    """A run's error beyond what its status line says: the lines after the first for a failed or
    incomplete run (its first line is ``failure_reason``), the whole error otherwise; "" for none.
    The page shows the reason once: in the status line, then only this."""
    text = (error or "").strip()
    if status not in WITH_REASON or not text:
        return text
    return text.partition(_first_line(text))[2].strip()


def library_said(status: str, error: str | None) -> str:
    """The TLS library's own text behind a reason ``failure_reason`` put in words (the evidence
    beside them), or ""."""
    if status not in WITH_REASON:
        return ""
    return tlswords.library_text(_first_line(error)) or ""


def too_short_for_intervals(duration_s: float | None, rounds: int | None) -> bool:
    """True when no cost can get an interval: fewer than ``MIN_ROUNDS`` rounds and fewer than
    ``MIN_SECONDS`` whole measured seconds per arm over all rounds (the per-second series has one
    point per whole second of each round)."""
    if duration_s is None or duration_s <= 0:
        return False
    rounds = max(int(rounds or 1), 1)
    return rounds < MIN_ROUNDS and math.floor(duration_s) * rounds < MIN_SECONDS
