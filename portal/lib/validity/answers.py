"""Validity checks on what the server answered: were the answers the page that was meant to be
measured (status codes, transport errors, redirects, authentication), and is an arm valid at all
(``invalid_arm``)? Body sizes and content are in ``portal.lib.validity.content``, how the arms'
connections behaved (kept alive, resumed) in ``portal.lib.validity.connections``."""

from __future__ import annotations

from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result, worst

# errors: transport errors (timeouts, resets) as a share of requests.
ERRORS_FAIL_SHARE = 0.01
# An arm is invalid when more than this share of its attempts failed (transport error or an answer
# outside the expected set): its numbers measure failures, not the page.
INVALID_FAILED_SHARE = 0.5
AUTH_STATUSES = ("401", "403", "407")


def expected_label(expected: list[int]) -> str:
    if not expected:
        return "2xx"
    classes = sorted({code // 100 for code in expected})
    parts = []
    for cls in classes:
        codes = [c for c in expected if c // 100 == cls]
        parts.append(f"{cls}xx" if len(codes) == 100 else ", ".join(str(c) for c in codes))
    return ", ".join(parts)


def is_expected(code: int, expected: list[int]) -> bool:
    return code in expected if expected else 200 <= code < 300


def _unexpected(config: dict, arm: dict) -> dict[str, int]:
    expected = config.get("expected_status") or []
    return {code: n for code, n in arm["status_codes"].items() if not is_expected(int(code), expected)}


def check_status_codes(config: dict, arms: dict[str, dict]) -> dict:
    label = expected_label(config.get("expected_status") or [])
    if not any(arm["status_codes"] for arm in arms.values()):
        return result(
            "status_codes", SKIP, "Not judged: no arm got a single answer (every request failed; see errors)."
        )
    bad: dict[str, dict] = {}
    findings = []
    for name, arm in arms.items():
        wrong = _unexpected(config, arm)
        if wrong:
            total = sum(arm["status_codes"].values())
            bad[name] = {"unexpected": wrong, "of": total}
            n = sum(wrong.values())
            codes = ", ".join(f"{code}×{count:,}" for code, count in wrong.items())
            findings.append(
                finding(
                    [name], FAIL, f"{name}: {codes} ({100 * n / total:.1f}% of {total:,}) outside {label}"
                )
            )
    if not bad:
        return result("status_codes", PASS, f"Every answer was in the expected set ({label}).")
    return result(
        "status_codes",
        FAIL,
        f"Answers outside the expected set: {'; '.join(f['reason'] for f in findings)}. Latencies of error "
        "answers measure the error path, not the page.",
        bad,
        findings,
    )


def check_errors(arms: dict[str, dict]) -> dict:
    stopped = {name: arm["stopped"] for name, arm in arms.items() if arm.get("stopped")}
    if not stopped and not any(arm["requests"] for arm in arms.values()):
        return result("errors", SKIP, "Not judged: no request was made in any measured window.")
    evidence = {}
    findings = []
    for name, arm in arms.items():
        count = sum(entry["count"] for entry in (arm.get("errors") or {}).values())
        if name in stopped:
            # The engine stopped the arm: its target stopped answering (few errors in the window
            # after the users backed off, or none at all when it happened in the warm-up).
            kinds = {kind: entry["count"] for kind, entry in (arm.get("errors") or {}).items()}
            seen = f" ({', '.join(f'{k}×{v:,}' for k, v in kinds.items())} in its window)" if kinds else ""
            evidence[name] = {**kinds, "stopped": stopped[name]}
            findings.append(finding([name], FAIL, f"{name}: stopped early, {stopped[name]}{seen}"))
        elif count:
            share = count / max(arm["requests"], 1)
            evidence[name] = {kind: entry["count"] for kind, entry in arm["errors"].items()}
            kinds = ", ".join(f"{k}×{v:,}" for k, v in evidence[name].items())
            findings.append(
                finding(
                    [name],
                    FAIL if share >= ERRORS_FAIL_SHARE else WARN,
                    f"{name}: {kinds} ({100 * share:.1f}% of {arm['requests']:,} attempts)",
                )
            )
    if not evidence:
        return result("errors", PASS, "No transport errors (timeouts, resets, refused connections).")
    return result(
        "errors",
        worst(findings),
        f"Transport errors: {'; '.join(f['reason'] for f in findings)}. Failed requests are not in the "
        "latencies.",
        evidence,
        findings,
    )


def invalid_arm(config: dict, arm: dict) -> str | None:
    """Why an arm's numbers cannot stand for the page (None when they can): no request in its
    window, or most attempts (more than half) failed: transport errors and answers outside the
    expected set; or the engine stopped it because its target stopped answering."""
    if arm.get("stopped"):
        return f"stopped early: {arm['stopped']}"
    attempts = arm["requests"]
    if not attempts:
        return "no request was made in its measured window"
    errors, wrong = _failures(config, arm)
    failed = sum(errors.values()) + sum(wrong.values())
    if failed / attempts <= INVALID_FAILED_SHARE:
        return None
    parts = [f"{kind}×{n:,}" for kind, n in errors.items()] + [f"status {c}×{n:,}" for c, n in wrong.items()]
    return f"{100 * failed / attempts:.0f}% of {attempts:,} attempts failed ({', '.join(parts)})"


def _failures(config: dict, arm: dict) -> tuple[dict[str, int], dict[str, int]]:
    """An arm's failed attempts: transport errors by kind, answers outside the expected set by code."""
    errors = {kind: entry["count"] for kind, entry in (arm.get("errors") or {}).items() if entry["count"]}
    return errors, _unexpected(config, arm)


NOTHING_MEASURED = "no arm measured the page"


def measured_nothing(config: dict, arms: dict[str, dict]) -> str | None:
    """Why a run none of whose arms is valid (``invalid_arm``) measured nothing, from each arm's
    status codes and errors: "no arm measured the page: 404 × 1,200 on every arm"; when the arms
    differ, "… 500 on every arm (plain × 1,210, tls × 1,190)" or arm by arm "plain: 404 × 1,200;
    tls: connection_refused × 3". None when an arm measured the page, or there is no arm."""
    if not arms or any(invalid_arm(config, arm) is None for arm in arms.values()):
        return None
    failed = {name: _what_failed(config, arm) for name, arm in arms.items()}
    said = {name: text for name, (text, _) in failed.items()}
    if len(arms) == 1:
        ((name, text),) = said.items()
        return f"{NOTHING_MEASURED}: {name}: {text}"
    if len(set(said.values())) == 1:
        return f"{NOTHING_MEASURED}: {next(iter(said.values()))} on every arm"
    kinds = {kind for _, kind in failed.values()}
    if len(kinds) == 1 and None not in kinds:
        (kind,) = kinds
        counts = ", ".join(f"{name} × {sum(_counts(config, arms[name]).values()):,}" for name in arms)
        return f"{NOTHING_MEASURED}: {kind} on every arm ({counts})"
    return f"{NOTHING_MEASURED}: " + "; ".join(f"{name}: {text}" for name, text in said.items())


def _counts(config: dict, arm: dict) -> dict[str, int]:
    """An arm's failed attempts by what failed, the status codes first."""
    errors, wrong = _failures(config, arm)
    return {**wrong, **errors}


def _what_failed(config: dict, arm: dict) -> tuple[str, str | None]:
    """What an invalid arm got instead of the page, in words ("404 × 1,200", "500 × 700 of 1,000
    attempts"), and its one kind of failure when it had one and every attempt failed (else None)."""
    if arm.get("stopped"):
        return f"stopped early ({arm['stopped']})", None
    attempts = arm["requests"]
    if not attempts:
        return "no request in its measured window", None
    counts = _counts(config, arm)
    text = ", ".join(f"{what} × {n:,}" for what, n in counts.items())
    failed = sum(counts.values())
    if failed < attempts:
        return f"{text} of {attempts:,} attempts", None
    return text, next(iter(counts)) if len(counts) == 1 else None


REDIRECT_STATUSES = ("301", "302", "303", "307", "308")


def check_redirect(config: dict, arms: dict[str, dict]) -> dict:
    hops = {name: arm["redirects"] for name, arm in arms.items() if arm.get("redirects")}
    unfollowed = {
        name: {c: n for c, n in arm["status_codes"].items() if c in REDIRECT_STATUSES}
        for name, arm in arms.items()
    }
    unfollowed = {name: codes for name, codes in unfollowed.items() if codes}
    if unfollowed:
        findings = [
            finding([name], FAIL, f"{name}: " + ", ".join(f"{c}×{n:,}" for c, n in codes.items()))
            for name, codes in unfollowed.items()
        ]
        return result(
            "redirect",
            FAIL,
            f"Redirects were measured instead of the page ({'; '.join(f['reason'] for f in findings)}). "
            "Measure the final URL, or let Tollgate resolve redirects before measuring.",
            {"unfollowed": unfollowed},
            findings,
        )
    if hops:
        findings = [
            finding(
                [name],
                WARN,
                f"{name}: " + ", ".join(f"{h['from']} → {h['to']} ({h['status']})" for h in chain),
            )
            for name, chain in hops.items()
        ]
        return result(
            "redirect",
            WARN,
            f"Redirects were resolved once before measuring and the final URLs measured "
            f"({'; '.join(f['reason'] for f in findings)}). Real clients pay for the redirect too.",
            {"redirects": hops},
            findings,
        )
    return result("redirect", PASS, "No redirects: the URLs given were measured.")


def check_auth(config: dict, arms: dict[str, dict]) -> dict:
    auth = config.get("auth") or {}
    demanded = {
        name: {c: n for c, n in arm["status_codes"].items() if c in AUTH_STATUSES}
        for name, arm in arms.items()
    }
    demanded = {name: codes for name, codes in demanded.items() if codes}
    if demanded:
        findings = [
            finding([name], FAIL, f"{name}: " + ", ".join(f"{c}×{n:,}" for c, n in codes.items()))
            for name, codes in demanded.items()
        ]
        if auth:
            # Never whose: the user name is half a credential (portal/lib/security/redaction.py).
            why = f"the {auth.get('type')} credentials were rejected"
        else:
            why = "the server wants credentials and none were configured"
        return result(
            "auth",
            FAIL,
            f"Authentication failed ({'; '.join(f['reason'] for f in findings)}): {why}. These are thousands "
            "of fast refusals, not the page: set Basic or bearer credentials (sent pre-emptively, no 401 "
            "round trip).",
            {"demanded": demanded, "configured": auth.get("type")},
            findings,
        )
    if auth:
        return result(
            "auth",
            PASS,
            f"{auth['type'].capitalize()} credentials were sent pre-emptively with every request and "
            "never refused.",
            {"configured": auth["type"]},
        )
    return result("auth", PASS, "No authentication configured, and the server asked for none.")
