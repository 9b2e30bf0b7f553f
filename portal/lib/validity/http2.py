"""The HTTP/2 arms (``h2``, ``h2_new``, ``h2c``): did they measure HTTP/2 as asked?

From each arm's ``http2`` facts (``workers.engine.recording.recorder``: ALPN per connection, the server's
``SETTINGS_MAX_CONCURRENT_STREAMS``, the most streams in flight, GOAWAYs by error code) and its
errors (``refused_stream``, ``stream_reset``, ``goaway``):

* a connection that negotiated anything but h2 (h2c on plain TCP) fails: the arm did not measure
  HTTP/2 (the engine refuses such a server in its preflight, so this flags a server that changed);
* streams the server reset (RST_STREAM) or refused (REFUSED_STREAM) fail the arm: its latencies leave
  out requests the server would not serve;
* a GOAWAY in the window warns (NO_ERROR: the server ended the connection, e.g. nginx's
  ``keepalive_requests``, and the next requests paid a new connection, counted by the keepalive
  check) and fails with any other error code (the server aborted the connection);
* a server that allows fewer concurrent streams than the run asked (``h2_streams``) warns: the arm
  ran with fewer requests in flight per connection than configured.

Runs without HTTP/2 arms get no entry (the check does not apply).
"""

from __future__ import annotations

from portal.lib.tls.matrix import base_arm
from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result, worst

HTTP2_ARMS = ("h2", "h2_new", "h2c")
STREAM_ERRORS = {"refused_stream": "refused (REFUSED_STREAM)", "stream_reset": "reset (RST_STREAM)"}


def _codes(counts: dict[str, int]) -> str:
    return ", ".join(f"{code} ×{n:,}" for code, n in sorted(counts.items()))


def _arm_findings(name: str, arm: dict, asked: int) -> list[dict]:
    facts = arm.get("http2") or {}
    out = []
    wanted = "h2c" if base_arm(name) == "h2c" else "h2"
    other = {proto: n for proto, n in (facts.get("alpn") or {}).items() if proto != wanted}
    if other:
        out.append(finding([name], FAIL, f"{name}: connections negotiated {_codes(other)}, not {wanted}"))
    errors = arm.get("errors") or {}
    for kind, words in STREAM_ERRORS.items():
        count = (errors.get(kind) or {}).get("count", 0)
        if count:
            said = f"{name}: {count:,} of {arm['requests']:,} streams {words} by the server"
            out.append(finding([name], FAIL, said))
    goaway = facts.get("goaway") or {}
    if goaway:
        aborted = {code: n for code, n in goaway.items() if code != "NO_ERROR"}
        said = f"{name}: GOAWAY during the window ({_codes(goaway)})"
        if aborted:
            out.append(finding([name], FAIL, said + ": the server aborted connections"))
        else:
            out.append(finding([name], WARN, said + ": the server ended connections, the next opened anew"))
    limit = facts.get("peer_max_streams")
    if base_arm(name) != "h2_new" and limit is not None and limit < asked:
        out.append(
            finding(
                [name],
                WARN,
                f"{name}: the server allows {limit} concurrent streams per connection "
                f"(SETTINGS_MAX_CONCURRENT_STREAMS), fewer than the {asked} asked; at most "
                f"{facts.get('streams_peak', 0)} were in flight",
            )
        )
    return out


def check_http2(config: dict, arms: dict[str, dict]) -> dict | None:
    names = [name for name in arms if base_arm(name) in HTTP2_ARMS]
    if not names:
        return None
    asked = int(config.get("h2_streams") or 1)
    evidence, findings = {}, []
    for name in names:
        arm = arms[name]
        facts = arm.get("http2")
        if not facts:
            continue
        errors = arm.get("errors") or {}
        evidence[name] = {
            **facts,
            "streams_asked": 1 if base_arm(name) == "h2_new" else asked,
            **{kind: (errors.get(kind) or {}).get("count", 0) for kind in (*STREAM_ERRORS, "goaway")},
        }
        findings += _arm_findings(name, arm, asked)
    if not evidence:
        return result("http2", SKIP, "Not judged: no HTTP/2 arm recorded its connections (no request).")
    if findings:
        return result(
            "http2",
            worst(findings),
            f"HTTP/2 did not run as asked: {'; '.join(f['reason'] for f in findings)}.",
            evidence,
            findings,
        )
    said = []
    for name, e in evidence.items():
        connections = sum(e["alpn"].values())
        limit = e["peer_max_streams"]
        said.append(
            f"{name}: {connections:,} connection(s), all {'/'.join(e['alpn']) or 'h2'}; up to "
            f"{e['streams_peak']} of {e['streams_asked']} stream(s) in flight"
            + (f" (server limit {limit})" if limit is not None else " (no server limit)")
        )
    return result("http2", PASS, "; ".join(said) + "; no stream reset or refused, no GOAWAY.", evidence)
