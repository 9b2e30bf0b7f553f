"""What every validity check returns: a status (pass, warn or fail) and why."""

from __future__ import annotations

PASS, WARN, FAIL = "pass", "warn", "fail"


def result(check: str, status: str, detail: str, evidence: dict | None = None) -> dict:
    return {"check": check, "status": status, "detail": detail, "evidence": evidence or {}}
