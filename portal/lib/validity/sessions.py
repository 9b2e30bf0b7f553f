"""The ``tls_sessions`` check: did the arms that open a TLS connection per request open sessions the
way their names say?

- **Full handshakes**: ``tls_new``, ``tls_mtls`` (a resumed session would skip the client
  certificate) and ``h2_new`` never offer a session, so none of their handshakes may resume; nor may a
  TLS matrix sub-arm of ``tls_new``/``h2_new`` that asks for full handshakes (``…+full``) or does not
  vary resumption at all.
- **Resumption**: ``tls_resumed`` and the matrix sub-arms that ask for it (``…+ticket``,
  ``…+sessid``) must resume at least ``RESUMPTION_MIN_SHARE`` of their handshakes in the window;
  fewer, and the arm measured full handshakes under a resumption's name.

Handshakes are counted from the handshake histogram (``connections_opened`` for old data). An arm with
no handshake in its window is not judged; no such arm at all: ``skip``.
"""

from __future__ import annotations

from portal.lib.tls import matrix
from portal.lib.validity.verdict import FAIL, PASS, SKIP, finding, result

# Share of a resuming arm's handshakes that must really resume.
RESUMPTION_MIN_SHARE = 0.9
# Arms that must never resume (a full handshake per connection), in report order.
FULL_HANDSHAKE_ARMS = ("tls_new", "tls_mtls", "h2_new")
FULL_HANDSHAKE_WHY = {"tls_mtls": ": a resumed session skips the client certificate and its check"}
RESUMING_ARM = "tls_resumed"
# A matrix sub-arm's resumption, by the short forms in its name (``tls_new@1.3+ticket``).
RESUMING_SHORTS = frozenset(matrix.SHORT[value] for value in ("ticket", "session_id"))


def handshakes(arm: dict) -> int:
    """TLS handshakes in the window (the handshake histogram's count; connections for old data)."""
    return int((arm.get("tls_handshake_us") or {}).get("count") or arm.get("connections_opened") or 0)


def must_resume(name: str) -> bool | None:
    """True for an arm that must resume, False for one that must do full handshakes, None for an arm
    this check does not judge (keep-alive arms, plain arms)."""
    if name == RESUMING_ARM:
        return True
    if name in FULL_HANDSHAKE_ARMS:
        return False
    if matrix.is_variant(name) and matrix.base_arm(name) in matrix.NEW_CONNECTION_ARMS:
        return bool(RESUMING_SHORTS & set(name.split(matrix.SEPARATOR, 1)[1].split("+")))
    return None


def _finding(name: str, resume: bool, reused: int, total: int) -> dict | None:
    if not resume:
        if not reused:
            return None
        why = f"it must do full handshakes{FULL_HANDSHAKE_WHY.get(name, '')}"
        return finding([name], FAIL, f"{name} resumed {reused:,} of {total:,} handshakes ({why})")
    if reused / total >= RESUMPTION_MIN_SHARE:
        return None
    did = "did not resume" if not reused else f"resumed only {100 * reused / total:.0f}%"
    return finding([name], FAIL, f"{name} {did} — {reused:,} of {total:,} handshakes resumed")


def check_tls_sessions(arms: dict[str, dict]) -> dict:
    """Did the full-handshake arms never resume and the resuming arms resume (module docstring)?"""
    evidence, findings, resuming = {}, [], []
    # Report order: the full-handshake arms, tls_resumed, then the matrix's sub-arms as they ran.
    order = [n for n in (*FULL_HANDSHAKE_ARMS, RESUMING_ARM) if n in arms]
    order += [n for n in arms if matrix.is_variant(n) and must_resume(n) is not None]
    for name in order:
        resume = must_resume(name)
        total = handshakes(arms[name])
        if not total:
            continue
        reused = arms[name]["tls_sessions_reused"]
        evidence[name] = {"reused": reused, "connections": total}
        found = _finding(name, resume, reused, total)
        if found:
            findings.append(found)
            if resume:
                resuming.append(name)
    if findings:
        why = ""
        if resuming:
            why = (
                ": the server does not keep sessions (no ticket key or session cache), so "
                f"{', '.join(resuming)} measured full handshakes and says nothing about resumption"
            )
        return result(
            "tls_sessions", FAIL, "; ".join(f["reason"] for f in findings) + why + ".", evidence, findings
        )
    if not evidence:
        return result(
            "tls_sessions",
            SKIP,
            "Not judged: no arm opened TLS connections per request (tls_new, tls_resumed, tls_mtls, h2_new) "
            "in its window.",
        )
    said = [
        f"{name} resumed {e['reused']:,} of {e['connections']:,}"
        if must_resume(name)
        else f"{name} did a full handshake on each of its {e['connections']:,} connections"
        for name, e in evidence.items()
        if not matrix.is_variant(name)
    ]
    variants = [name for name in evidence if matrix.is_variant(name)]
    if variants:  # one sentence for them all (a matrix has dozens); the evidence keeps each
        resumed = sum(1 for name in variants if must_resume(name))
        said.append(
            f"{len(variants)} matrix sub-arms opened sessions as their names say ({resumed} resumed at least "
            f"{RESUMPTION_MIN_SHARE:.0%} of their handshakes, {len(variants) - resumed} never resumed)"
        )
    return result("tls_sessions", PASS, "; ".join(said) + ".", evidence)
