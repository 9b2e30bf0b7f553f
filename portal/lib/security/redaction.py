"""Credentials' names out of a report: a report states that Basic credentials were sent, never the
user name (it is half a credential, and the report is shared and signed). Reports frozen before
this rule named it in ``run.config.auth.user`` and in the ``auth`` check's reason; this removes both
and recomputes ``run.config_hash``, which covered the name (a 64-bit hash of a guessable name would
betray it). The caller signs the result again (``portal.signing.services.redact_credential_names``).

Django-free.
"""

from __future__ import annotations

import copy

from portal.lib.report.report import config_hash


def without_credential_names(report: dict) -> dict | None:
    """A copy of ``report`` without the Basic-auth user name; None when it names none."""
    config = (report.get("run") or {}).get("config") or {}
    auth = config.get("auth")
    if not isinstance(auth, dict) or "user" not in auth:
        return None
    name = str(auth.get("user") or "")
    out = copy.deepcopy(report)
    run = out["run"]
    del run["config"]["auth"]["user"]
    if "config_hash" in run:
        run["config_hash"] = config_hash(run["config"])
    # The auth check said "the basic credentials of NAME were rejected", wherever it is repeated.
    return _replaced(out, f" of {name} were rejected", " were rejected") if name else out


def _replaced(value, old: str, new: str):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {key: _replaced(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    return value
