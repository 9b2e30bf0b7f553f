"""Did each arm's connections behave as its name says? The keep-alive arms kept one connection per
user (``keepalive``); the arms that open a TLS connection per request did full handshakes or resumed
as their names say (``tls_sessions``). Either way a connection the arm did not mean to open (or a
handshake it did not mean to skip) puts another cost into the arm's numbers.

``tls_sessions``:

- **Full handshakes**: ``tls_new``, ``tls_mtls`` (a resumed session would skip the client
  certificate), ``h2_new`` and ``h3_new`` (and its matrix sub-arms) never offer a session, so none of
  their handshakes may resume; nor may a TLS matrix sub-arm of ``tls_new``/``h2_new`` that asks for
  full handshakes (``…+full``) or does not vary resumption at all.
- **Resumption**: ``tls_resumed``, ``h3_resumed``, ``h3_0rtt`` and the matrix sub-arms that ask for
  it (``…+ticket``, ``…+sessid``) must resume at least ``RESUMPTION_MIN_SHARE`` of their handshakes in
  the window; fewer, and the arm measured full handshakes under a resumption's name. (An HTTP/3 arm's
  handshake is its QUIC handshake; ``tls_sessions_reused`` its connections that resumed.)

Handshakes are counted from the handshake histogram (``connections_opened`` for old data). An arm with
no handshake in its window is not judged; no such arm at all: ``skip``.
"""

from __future__ import annotations

from portal.lib.tls import matrix
from portal.lib.tls.matrix import base_arm
from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result, worst

# keepalive: a keep-alive arm whose server closed connections warns; it fails from this share of its
# requests paying a new connection, where the arm's p95 (a cost metric) may be a connection's time.
KEEPALIVE_FAIL_SHARE = 0.05
# h2, h2c: a GOAWAY ends the connection (validity.http2); h3: the server closed its QUIC connection.
KEEPALIVE_ARMS = ("plain", "tls", "h2", "h2c", "h3")

# Share of a resuming arm's handshakes that must really resume.
RESUMPTION_MIN_SHARE = 0.9
# Arms that must never resume (a full handshake per connection), in report order.
FULL_HANDSHAKE_ARMS = ("tls_new", "tls_mtls", "h2_new", "h3_new")
FULL_HANDSHAKE_WHY = {"tls_mtls": ": a resumed session skips the client certificate and its check"}
RESUMING_ARMS = ("tls_resumed", "h3_resumed", "h3_0rtt")
# A matrix sub-arm's resumption, by the short forms in its name (``tls_new@1.3+ticket``).
RESUMING_SHORTS = frozenset(matrix.SHORT[value] for value in ("ticket", "session_id"))


def handshakes(arm: dict) -> int:
    """TLS handshakes in the window (the handshake histogram's count; connections for old data)."""
    return int((arm.get("tls_handshake_us") or {}).get("count") or arm.get("connections_opened") or 0)


def must_resume(name: str) -> bool | None:
    """True for an arm that must resume, False for one that must do full handshakes, None for an arm
    this check does not judge (keep-alive arms, plain arms)."""
    if name in RESUMING_ARMS:
        return True
    if name in FULL_HANDSHAKE_ARMS or base_arm(name) == "h3_new":  # h3_new@<group>: no ticket offered
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
    # Report order: the full-handshake arms, the resuming ones, then the matrix's sub-arms as they ran.
    order = [n for n in (*FULL_HANDSHAKE_ARMS, *RESUMING_ARMS) if n in arms]
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


def _reopened(name: str, arm: dict) -> dict:
    """One keep-alive arm's connections in its window, against its requests."""
    opened, requests = arm.get("connections_opened") or 0, arm["requests"]
    return {
        "users": arm.get("users"),
        "requests": requests,
        "connections_opened": opened,
        "connections_reopened": arm["connections_reopened"],
        "new_connection_share": round(opened / requests, 4),
        "requests_per_connection": round(requests / opened, 1) if opened else None,
    }


def check_keepalive(arms: dict[str, dict]) -> dict:
    """Did the keep-alive arms (``plain``, ``tls`` and the matrix's ``tls@…``) keep one connection per
    user? A server that closes them (nginx ``keepalive_requests``, Apache ``MaxKeepAliveRequests``,
    an idle timeout shorter than the think time) makes every N-th request pay a new connection, and
    on ``tls`` a full handshake: the arm is then not the warm-connection cost it is read as."""
    evidence: dict[str, dict] = {}
    findings = []
    unjudged = {}
    for name, arm in arms.items():
        if base_arm(name) not in KEEPALIVE_ARMS:
            continue
        if arm.get("connections_reopened") is None:
            unjudged[name] = "stored before the engine counted reopened connections"
            continue
        if not arm["requests"]:
            unjudged[name] = "no request in its window"
            continue
        evidence[name] = entry = _reopened(name, arm)
        if not entry["connections_reopened"]:
            continue
        share = entry["new_connection_share"]
        tls = base_arm(name) in ("tls", "h2")
        paid = "a new connection and a TLS handshake" if tls else "a new TCP connection"
        per = entry["requests_per_connection"]
        findings.append(
            finding(
                [name],
                FAIL if share >= KEEPALIVE_FAIL_SHARE else WARN,
                f"{name}: the server closed its connections, {entry['connections_reopened']:,} reopened "
                f"({entry['connections_opened']:,} opened for {entry['requests']:,} requests by "
                f"{entry['users']} users, about {per:g} requests each): {100 * share:.1f}% of requests paid "
                f"{paid}",
            )
        )
    note = f" Not judged: {'; '.join(f'{n} ({why})' for n, why in unjudged.items())}." if unjudged else ""
    if findings:
        return result(
            "keepalive",
            worst(findings),
            f"Keep-alive connections were not kept ({'; '.join(f['reason'] for f in findings)}). Those "
            "requests paid for opening a connection, so these arms mix the warm-connection cost with a "
            "new connection's: the server ends a connection after a number of requests (nginx "
            "keepalive_requests, Apache MaxKeepAliveRequests) or when it is idle (keepalive_timeout, "
            "KeepAliveTimeout). Its clients pay that too; to measure the warm connection alone, raise "
            f"them for the test.{note}",
            evidence,
            findings,
        )
    if not evidence:
        if not unjudged:
            return result("keepalive", SKIP, "Not judged: no keep-alive arm (plain, tls) was measured.")
        return result("keepalive", SKIP, note.strip())
    return result(
        "keepalive",
        PASS,
        "Every keep-alive arm kept its connections: none was closed by the server and reopened in the "
        f"measured window.{note}",
        evidence,
    )
