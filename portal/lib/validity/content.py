"""Validity checks on what the pages were: did each arm get one body per path (``content_length``),
and did every pair of arms the report compares get the same thing (``same_content``)?

A cost is the difference of two arms; it is the cost of TLS only if both arms fetched the same
representation of the same page. The arms' URLs may differ in host, port and path (the plain and
TLS URLs of a target), so arms are matched by *mapped request target*: the i-th target of one arm
(``targets[i]``, the i-th path of the request mix, or the arm's own URL) against the i-th of the
other. For each mapped target the body sizes, ``Content-Type`` and ``Content-Encoding`` of the
expected answers must agree, and over the arm the status mix.
"""

from __future__ import annotations

from portal.lib.stats.costs import compared_pairs
from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result

# same_content: a status code counts in an arm's mix from this share of its answers; two mixes
# differ when their codes differ or one code's share differs by this many percentage points.
STATUS_MIX_MIN_SHARE = 0.01
STATUS_MIX_MAX_GAP_PCT = 10.0


def check_content_length(arms: dict[str, dict]) -> dict:
    """Within an arm: one body size per path, or a dynamic page whose spread adds to the latency."""
    varying: dict[str, dict] = {}
    findings = []
    recorded = False
    for name, arm in arms.items():
        for path, sizes in (arm.get("sizes_by_path") or {}).items():
            recorded = recorded or bool(sizes)
            if len(sizes) > 1:
                varying.setdefault(name, {})[path] = sizes
                findings.append(
                    finding(
                        [name], WARN, f"{name} {path}: {len(sizes)} sizes {min(sizes):,}–{max(sizes):,} B"
                    )
                )
    if findings:
        return result(
            "content_length",
            WARN,
            f"Body size varies within an arm ({'; '.join(f['reason'] for f in findings)}): a dynamic page "
            "adds its own spread to the latencies.",
            {"varying": varying},
            findings,
        )
    if not recorded:
        return result(
            "content_length", SKIP, "Not judged: no expected answer was recorded, so no body to measure."
        )
    return result("content_length", PASS, "Every path had one body size in each arm.")


def _mapped_paths(arm: dict, other: dict) -> list[tuple[str, str]]:
    """(path in arm, path in other) for each mapped request target."""
    mine, theirs = arm.get("targets") or [], other.get("targets") or []
    if mine and theirs and len(mine) == len(theirs):
        return [(a["path"], b["path"]) for a, b in zip(mine, theirs, strict=True)]
    # Stored without targets: paths of the same name, or the one path of each.
    a_paths, b_paths = list(arm.get("sizes_by_path") or {}), list(other.get("sizes_by_path") or {})
    if len(a_paths) == 1 and len(b_paths) == 1:
        return [(a_paths[0], b_paths[0])]
    return [(path, path) for path in a_paths if path in b_paths]


def _bytes(sizes: list[int]) -> str:
    return f"{sizes[0]:,} B" if len(sizes) == 1 else f"{min(sizes):,}–{max(sizes):,} B"


def _sizes_differ(a: list[int], b: list[int]) -> bool:
    if len(a) == 1 and len(b) == 1:
        return a != b
    # A dynamic page (several sizes): different only when the ranges do not even overlap.
    return max(a) < min(b) or max(b) < min(a)


def _normalized(key: str, values: list[str]) -> list[str]:
    if key == "content_encoding":
        return sorted({v.strip().lower() or "identity" for v in values})
    return sorted({";".join(part.strip() for part in v.lower().split(";")) or "(none)" for v in values})


HEADER_LABELS = {"content_type": "Content-Type", "content_encoding": "Content-Encoding"}


def _target_differences(arm: dict, other: dict, path_a: str, path_b: str) -> list[str]:
    out = []
    sizes_a = (arm.get("sizes_by_path") or {}).get(path_a)
    sizes_b = (other.get("sizes_by_path") or {}).get(path_b)
    if sizes_a and sizes_b and _sizes_differ(sizes_a, sizes_b):
        out.append(f"body {_bytes(sizes_a)} vs {_bytes(sizes_b)}")
    content_a = (arm.get("content_by_path") or {}).get(path_a)
    content_b = (other.get("content_by_path") or {}).get(path_b)
    if content_a and content_b:
        for key, label in HEADER_LABELS.items():
            a, b = _normalized(key, content_a.get(key, [])), _normalized(key, content_b.get(key, []))
            if a != b:
                out.append(f"{label} {', '.join(a)} vs {', '.join(b)}")
    return out


def status_mix(arm: dict) -> dict[str, float]:
    """Share (%) of each status code that makes up at least ``STATUS_MIX_MIN_SHARE`` of the answers."""
    codes = arm.get("status_codes") or {}
    total = sum(codes.values())
    if not total:
        return {}
    return {
        code: round(100.0 * n / total, 1)
        for code, n in sorted(codes.items())
        if n / total >= STATUS_MIX_MIN_SHARE
    }


def _mix_differs(a: dict[str, float], b: dict[str, float]) -> bool:
    if not a or not b:
        return False
    if set(a) != set(b):
        return True
    return any(abs(a[code] - b[code]) >= STATUS_MIX_MAX_GAP_PCT for code in a)


def _mix_text(mix: dict[str, float]) -> str:
    return ", ".join(f"{code} {share:g}%" for code, share in mix.items())


def compare_pair(arm: dict, other: dict) -> dict:
    """What differs between two arms' answers: per mapped target, and the status mix."""
    targets = []
    for path_a, path_b in _mapped_paths(arm, other):
        differences = _target_differences(arm, other, path_a, path_b)
        if differences:
            label = path_a if path_a == path_b else f"{path_a} vs {path_b}"
            targets.append({"paths": [path_a, path_b], "label": label, "differences": differences})
    mix_a, mix_b = status_mix(arm), status_mix(other)
    mix = None
    if _mix_differs(mix_a, mix_b):
        mix = {"arm": mix_a, "base": mix_b}
    return {"targets": targets, "status_mix": mix}


def _pair_reason(a: str, b: str, found: dict) -> str:
    parts = [f"{t['label']}: {'; '.join(t['differences'])}" for t in found["targets"]]
    if found["status_mix"]:
        parts.append(
            f"status {_mix_text(found['status_mix']['arm'])} vs {_mix_text(found['status_mix']['base'])}"
        )
    return f"{a} vs {b} — {'; '.join(parts)}"


def check_same_content(arms: dict[str, dict]) -> dict:
    """Every compared pair of arms (each cost's two arms, each arm against ``plain``) got the same
    bodies, Content-Type, Content-Encoding and status mix."""
    pairs = [
        (a, b)
        for a, b in compared_pairs(list(arms))
        if (arms[a].get("sizes_by_path") or arms[a].get("status_codes"))
        and (arms[b].get("sizes_by_path") or arms[b].get("status_codes"))
    ]
    if not pairs:
        return result(
            "same_content", SKIP, "Not judged: fewer than two arms with answers, nothing to compare."
        )
    findings, evidence = [], {"compared": [list(pair) for pair in pairs], "differing": []}
    for a, b in pairs:
        found = compare_pair(arms[a], arms[b])
        if found["targets"] or found["status_mix"]:
            evidence["differing"].append({"arms": [a, b], **found})
            findings.append(finding([a, b], FAIL, _pair_reason(a, b, found)))
    if findings:
        return result(
            "same_content",
            FAIL,
            f"Compared arms were not served the same thing ({'; '.join(f['reason'] for f in findings)}): "
            "their difference measures the pages, not TLS. Give both URLs the same page and the same "
            "server settings (compression, content type).",
            evidence,
            findings,
        )
    recorded = all(arms[name].get("content_by_path") for pair in pairs for name in pair)
    what = "body sizes, Content-Type, Content-Encoding" if recorded else "body sizes"
    note = "" if recorded else " (this run did not record Content-Type and Content-Encoding)"
    compared = ", ".join(f"{a} vs {b}" for a, b in pairs)
    return result(
        "same_content",
        PASS,
        f"Each compared pair ({compared}) got the same {what} and status mix for every mapped path{note}.",
        evidence,
    )
