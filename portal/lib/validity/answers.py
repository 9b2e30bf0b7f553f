"""Validity checks on what the server answered: were the answers the page that was meant to be
measured (status codes, transport errors, body sizes, redirects, authentication), and did the TLS
arms open sessions the way their names say?"""

from __future__ import annotations

from portal.lib.validity.verdict import FAIL, PASS, WARN, result

# errors: transport errors (timeouts, resets) as a share of requests.
ERRORS_FAIL_SHARE = 0.01
# tls_resumption: share of tls_resumed connections that must really resume.
RESUMPTION_MIN_SHARE = 0.9
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


def check_status_codes(config: dict, arms: dict[str, dict]) -> dict:
    expected = config.get("expected_status") or []
    bad: dict[str, dict] = {}
    for name, arm in arms.items():
        wrong = {code: n for code, n in arm["status_codes"].items() if not is_expected(int(code), expected)}
        if wrong:
            total = sum(arm["status_codes"].values())
            bad[name] = {"unexpected": wrong, "of": total}
    label = expected_label(expected)
    if not bad:
        return result("status_codes", PASS, f"Every answer was in the expected set ({label}).")
    parts = []
    for name, entry in bad.items():
        n = sum(entry["unexpected"].values())
        codes = ", ".join(f"{code}×{count}" for code, count in entry["unexpected"].items())
        parts.append(f"{name}: {codes} ({100 * n / entry['of']:.1f}% of {entry['of']})")
    return result(
        "status_codes",
        FAIL,
        f"Answers outside the expected set ({label}): {'; '.join(parts)}. Latencies of error answers "
        "measure the error path, not the page.",
        bad,
    )


def check_errors(arms: dict[str, dict]) -> dict:
    evidence = {}
    worst = 0.0
    for name, arm in arms.items():
        count = sum(entry["count"] for entry in (arm.get("errors") or {}).values())
        if count:
            share = count / max(arm["requests"], 1)
            worst = max(worst, share)
            evidence[name] = {kind: entry["count"] for kind, entry in arm["errors"].items()}
    if not evidence:
        return result("errors", PASS, "No transport errors (timeouts, resets, refused connections).")
    detail = "; ".join(
        f"{name}: " + ", ".join(f"{k}×{v}" for k, v in kinds.items()) for name, kinds in evidence.items()
    )
    status = FAIL if worst >= ERRORS_FAIL_SHARE else WARN
    return result(
        "errors", status, f"Transport errors: {detail}. Failed requests are not in the latencies.", evidence
    )


def check_content_length(arms: dict[str, dict]) -> dict:
    varying: dict[str, dict] = {}
    by_path: dict[str, dict[str, list[int]]] = {}
    for name, arm in arms.items():
        for path, sizes in (arm.get("sizes_by_path") or {}).items():
            if len(sizes) > 1:
                varying.setdefault(name, {})[path] = sizes
            by_path.setdefault(path, {})[name] = sizes
    mismatched = {
        path: per_arm
        for path, per_arm in by_path.items()
        if len(per_arm) > 1
        and all(len(sizes) == 1 for sizes in per_arm.values())
        and len({sizes[0] for sizes in per_arm.values()}) > 1
    }
    if mismatched:
        parts = [
            f"{path}: " + ", ".join(f"{name} {sizes[0]} B" for name, sizes in per_arm.items())
            for path, per_arm in mismatched.items()
        ]
        return result(
            "content_length",
            FAIL,
            f"The arms were served different bodies for the same path ({'; '.join(parts)}): they did not "
            "measure the same page, so their difference is not the cost of TLS.",
            {"mismatched": mismatched, "varying": varying},
        )
    if varying:
        parts = [
            f"{name} {path}: {len(sizes)} sizes {min(sizes)}–{max(sizes)} B"
            for name, paths in varying.items()
            for path, sizes in paths.items()
        ]
        return result(
            "content_length",
            WARN,
            f"Body size varies within an arm ({'; '.join(parts)}): a dynamic page adds its own spread "
            "to the latencies.",
            {"varying": varying},
        )
    return result("content_length", PASS, "Every path had one body size, the same in every arm.")


def check_redirect(config: dict, arms: dict[str, dict]) -> dict:
    hops = {name: arm["redirects"] for name, arm in arms.items() if arm.get("redirects")}
    unfollowed = {
        name: {c: n for c, n in arm["status_codes"].items() if c in ("301", "302", "303", "307", "308")}
        for name, arm in arms.items()
    }
    unfollowed = {name: codes for name, codes in unfollowed.items() if codes}
    if unfollowed:
        parts = [
            f"{name}: " + ", ".join(f"{c}×{n}" for c, n in codes.items())
            for name, codes in unfollowed.items()
        ]
        return result(
            "redirect",
            FAIL,
            f"Redirects were measured instead of the page ({'; '.join(parts)}). Measure the final URL, or "
            "let Tollgate resolve redirects before measuring.",
            {"unfollowed": unfollowed},
        )
    if hops:
        parts = []
        for name, chain in hops.items():
            parts.append(f"{name}: " + ", ".join(f"{h['from']} → {h['to']} ({h['status']})" for h in chain))
        return result(
            "redirect",
            WARN,
            f"Redirects were resolved once before measuring and the final URLs measured "
            f"({'; '.join(parts)}). Real clients pay for the redirect too.",
            {"redirects": hops},
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
        parts = [
            f"{name}: " + ", ".join(f"{c}×{n}" for c, n in codes.items()) for name, codes in demanded.items()
        ]
        if auth:
            whose = f" of {auth['user']}" if auth.get("user") else ""
            why = f"the {auth.get('type')} credentials{whose} were rejected"
        else:
            why = "the server wants credentials and none were configured"
        return result(
            "auth",
            FAIL,
            f"Authentication failed ({'; '.join(parts)}): {why}. These are thousands of fast refusals, not "
            "the page: set Basic or bearer credentials (sent pre-emptively, no 401 round trip).",
            {"demanded": demanded, "configured": auth.get("type")},
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


def check_tls_sessions(arms: dict[str, dict]) -> dict:
    evidence = {}
    problems = []
    status = PASS
    new = arms.get("tls_new")
    if new and new.get("connections_opened"):
        evidence["tls_new"] = {"reused": new["tls_sessions_reused"], "connections": new["connections_opened"]}
        if new["tls_sessions_reused"]:
            status = FAIL
            problems.append(
                f"tls_new resumed {new['tls_sessions_reused']} sessions (it must do full handshakes)"
            )
    resumed = arms.get("tls_resumed")
    if resumed and resumed.get("connections_opened"):
        share = resumed["tls_sessions_reused"] / resumed["connections_opened"]
        evidence["tls_resumed"] = {
            "reused": resumed["tls_sessions_reused"],
            "connections": resumed["connections_opened"],
        }
        if share < RESUMPTION_MIN_SHARE:
            status = FAIL if status == FAIL else WARN
            problems.append(
                f"tls_resumed resumed only {100 * share:.0f}% of its connections: the server does not keep "
                "sessions (no ticket key or session cache), so that arm measured full handshakes"
            )
    if problems:
        return result("tls_sessions", status, "; ".join(problems) + ".", evidence)
    if not evidence:
        return result("tls_sessions", PASS, "No arm opened TLS connections per request.")
    said = []
    if "tls_new" in evidence:
        said.append(
            f"tls_new did a full handshake on each of its {evidence['tls_new']['connections']} connections"
        )
    if "tls_resumed" in evidence:
        e = evidence["tls_resumed"]
        said.append(f"tls_resumed resumed {e['reused']} of {e['connections']}")
    return result("tls_sessions", PASS, "; ".join(said) + ".", evidence)
