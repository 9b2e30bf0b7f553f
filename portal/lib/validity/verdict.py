"""What every validity check returns: a status (pass, warn, fail or skip), why, and which arms it
implicates.

``findings`` say which arms (one arm, or the two arms of a pair) each problem is about, with its own
status and a short reason that names them; ``arms`` lists every arm a finding names. A cost is judged
only on the findings about its own two arms (``portal.lib.report.evidence.judge_costs``): a warning about
``tls_resumed`` does not cast doubt on ``tls`` − ``plain``.
"""

from __future__ import annotations

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
STATUSES = (PASS, WARN, FAIL, SKIP)


def finding(arms: list[str] | tuple[str, ...], status: str, reason: str) -> dict:
    """One problem: the arms it is about (the reason names them), its status (warn or fail)."""
    return {"arms": list(arms), "status": status, "reason": reason}


def result(
    check: str, status: str, detail: str, evidence: dict | None = None, findings: list[dict] | None = None
) -> dict:
    findings = findings or []
    arms = list(dict.fromkeys(arm for item in findings for arm in item["arms"]))
    return {
        "check": check,
        "status": status,
        "detail": detail,
        "evidence": evidence or {},
        "arms": arms,
        "findings": findings,
    }


def worst(findings: list[dict]) -> str:
    """The check's status from its findings: fail over warn over pass."""
    statuses = {item["status"] for item in findings}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else PASS
