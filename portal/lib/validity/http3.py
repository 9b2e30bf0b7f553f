"""The HTTP/3 arms (``h3``, ``h3_new``, ``h3_resumed``, ``h3_0rtt`` and the matrix's ``h3_new@…``): did
they measure HTTP/3 over QUIC as asked?

From each arm's ``quic`` facts (the engine's ``result.quic``, docs/engine-protocol.md, "HTTP/3": counted
over the window, warm-up excluded), one finding per problem, naming its arm, so only the costs of that
arm lose their verdict (``portal.lib.report.evidence.judge_costs``):

* **loss**: ``packets_lost`` / ``datagrams_sent`` above ``LOSS_FAIL_SHARE`` (1 %) fails the arm: its
  requests waited for QUIC's loss recovery (a probe timeout is at least one RTT, ``pto_count`` in the
  evidence), so its times measure the path, not HTTP/3. On loopback any loss is the host's (a full
  socket buffer) or a relay's; below the threshold it is only in the evidence;
* **version or Retry change**: connections that negotiated more than one QUIC version in the window
  (``versions`` with two keys) fail the arm; so do connections of which some got a Retry and some
  did not (0 < ``retry`` < ``connections``: some handshakes paid an extra round trip, others not).
  Every connection retried warns: each handshake paid that round trip, which a server without
  Retry does not ask;
* **0-RTT refused** (``h3_0rtt`` only): a connection whose early data the server refused
  (``early_data.refused``) or that had no ticket allowing it (``no_ticket``) sent its request after
  the handshake, so the arm's times mix 0-RTT with resumed requests; the arm fails (its costs are not
  judged) — a 0-RTT cost is only given when every connection in its window was accepted as 0-RTT;
  connections with no acceptance at all (``accepted`` 0) fail too;
* **streams reset**: requests whose stream the server reset (``streams_reset``) fail the arm: its
  latencies leave out requests the server would not serve;
* **ALPN**: a connection that negotiated anything but ``h3`` fails (the preflight refuses such a
  server; this flags one that changed during the run);
* **the generator's saturation** (``measurement._generator_of``, the ``generator_saturation``
  check's own thresholds): an HTTP/3 arm the generator could not keep up with fails here, where
  ``generator_saturation`` only warns. QUIC runs in the generator's own process (packet protection,
  loss recovery, congestion control: several times TCP + TLS's client CPU per request), so a
  saturated generator inflates the HTTP/3 arm alone and biases every comparison with a TCP arm.

Like-for-like content against the other arms is the ``same_content`` check's (``validity.content``):
the HTTP/3 costs' pairs are compared arms like every other cost's. An HTTP/3 arm without ``quic``
facts (stored before the engine kept them) is not judged: the check says ``skip`` when no arm has them.
Runs without HTTP/3 arms get no entry.
"""

from __future__ import annotations

from portal.lib.tls.matrix import base_arm
from portal.lib.validity.measurement import _generator_of
from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result, worst

HTTP3_ARMS = ("h3", "h3_new", "h3_resumed", "h3_0rtt")
LOSS_FAIL_SHARE = 0.01  # packets lost per datagram sent


def _counts(counts: dict) -> str:
    return ", ".join(f"{key} ×{n:,}" for key, n in sorted(counts.items()))


def loss_share(quic: dict) -> float | None:
    """Packets lost per datagram sent in the window (None when nothing was sent)."""
    sent = quic.get("datagrams_sent") or 0
    return (quic.get("packets_lost") or 0) / sent if sent else None


def _loss(name: str, quic: dict) -> list[dict]:
    share = loss_share(quic)
    if share is None or share <= LOSS_FAIL_SHARE:
        return []
    said = (
        f"{name}: {quic.get('packets_lost', 0):,} packets lost of {quic['datagrams_sent']:,} datagrams sent "
        f"({100 * share:.1f}%, above {100 * LOSS_FAIL_SHARE:.0f}%; {quic.get('pto_count', 0):,} probe "
        "timeouts): its requests waited for loss recovery"
    )
    return [finding([name], FAIL, said)]


def _versions(name: str, quic: dict) -> list[dict]:
    out = []
    versions = quic.get("versions") or {}
    if len(versions) > 1:
        said = f"{name}: the QUIC version changed during the run ({_counts(versions)} connections)"
        out.append(finding([name], FAIL, said))
    retry, connections = quic.get("retry") or 0, quic.get("connections") or 0
    if retry and retry < connections:
        said = (
            f"{name}: {retry:,} of {connections:,} connections got a Retry, the others not: some "
            "handshakes paid an extra round trip"
        )
        out.append(finding([name], FAIL, said))
    elif retry:
        said = f"{name}: every connection ({retry:,}) got a Retry: each handshake paid an extra round trip"
        out.append(finding([name], WARN, said))
    return out


def _early_data(name: str, quic: dict) -> list[dict]:
    if base_arm(name) != "h3_0rtt":
        return []
    early = quic.get("early_data") or {}
    accepted, refused, no_ticket = (early.get(k) or 0 for k in ("accepted", "refused", "no_ticket"))
    total = accepted + refused + no_ticket
    if refused or no_ticket:
        parts = [f"{refused:,} refused"] if refused else []
        parts += [f"{no_ticket:,} without a ticket allowing it"] if no_ticket else []
        said = (
            f"{name}: 0-RTT not accepted on {refused + no_ticket:,} of {total:,} connections "
            f"({', '.join(parts)}): those requests went after the handshake, so the arm is not 0-RTT's time"
        )
        return [finding([name], FAIL, said)]
    if not accepted and (quic.get("connections") or 0):
        said = f"{name}: the server accepted no 0-RTT early data on {quic['connections']:,} connections"
        return [finding([name], FAIL, said)]
    return []


def _streams_and_alpn(name: str, quic: dict, requests: int) -> list[dict]:
    out = []
    reset = quic.get("streams_reset") or 0
    if reset:
        out.append(finding([name], FAIL, f"{name}: {reset:,} of {requests:,} streams reset by the server"))
    other = {proto: n for proto, n in (quic.get("alpn") or {}).items() if proto != "h3"}
    if other:
        out.append(finding([name], FAIL, f"{name}: connections negotiated {_counts(other)}, not h3"))
    return out


def _generator(name: str, arm: dict) -> list[dict]:
    _, reasons = _generator_of(arm)
    if not reasons:
        return []
    said = f"{name}: the generator was saturated ({', '.join(reasons)}): QUIC's client work inflated it"
    return [finding([name], FAIL, said)]


def evidence_of(quic: dict) -> dict:
    """One arm's QUIC facts as the check's evidence (and the run page's QUIC table)."""
    share = loss_share(quic)
    return {
        "port": quic.get("port"),
        "discovered_by": quic.get("discovered_by"),
        "connections": quic.get("connections") or 0,
        "versions": quic.get("versions") or {},
        "alpn": quic.get("alpn") or {},
        "groups": quic.get("groups") or {},
        "retry": quic.get("retry") or 0,
        "early_data": quic.get("early_data") or {},
        "datagrams_sent": quic.get("datagrams_sent") or 0,
        "packets_lost": quic.get("packets_lost") or 0,
        "pto_count": quic.get("pto_count") or 0,
        "loss_pct": None if share is None else round(100 * share, 2),
        "streams_reset": quic.get("streams_reset") or 0,
        "first_flight_bytes_max": quic.get("first_flight_bytes_max"),
    }


def _named(counts: dict) -> str:
    """``{"1": 300}`` → "1"; several: "1 ×200, 2 ×100"; none: "—"."""
    if not counts:
        return "—"
    if len(counts) == 1:
        return next(iter(counts))
    return _counts(counts)


def quic_rows(arms: dict[str, dict]) -> list[dict]:
    """The report's ``quic``: one row per HTTP/3 arm with QUIC facts, as the run page's QUIC table
    shows them (version, group, ALPN, 0-RTT accepted/refused, loss %, the first flight's bytes)."""
    rows = []
    for name, arm in arms.items():
        quic = arm.get("quic")
        if base_arm(name) not in HTTP3_ARMS or not quic:
            continue
        facts = evidence_of(quic)
        early = facts["early_data"]
        rows.append(
            {
                "arm": name,
                **facts,
                "version": _named(facts["versions"]),
                "group": _named(facts["groups"]),
                "alpn_text": _named(facts["alpn"]),
                "early_data_text": (
                    f"{early.get('accepted', 0):,} / {early.get('refused', 0) + early.get('no_ticket', 0):,}"
                    if base_arm(name) == "h3_0rtt"
                    else "—"
                ),
            }
        )
    return rows


def check_http3(arms: dict[str, dict]) -> dict | None:
    names = [name for name in arms if base_arm(name) in HTTP3_ARMS]
    if not names:
        return None
    evidence, findings, unjudged = {}, [], []
    # Whether any HTTP/3 arm recorded the generator's load (else the pass cannot speak for it).
    loaded = any(_generator_of(arms[name])[0]["cpu_pct_median"] is not None for name in names)
    for name in names:
        arm = arms[name]
        quic = arm.get("quic")
        if not quic:
            unjudged.append(name)
            continue
        evidence[name] = evidence_of(quic)
        findings += _loss(name, quic) + _versions(name, quic) + _early_data(name, quic)
        findings += _streams_and_alpn(name, quic, arm.get("requests") or 0) + _generator(name, arm)
    note = f" Not judged (no QUIC facts recorded): {', '.join(unjudged)}." if unjudged else ""
    if not evidence:
        return result("http3", SKIP, "Not judged: no HTTP/3 arm recorded its QUIC facts." + note)
    if findings:
        return result(
            "http3",
            worst(findings),
            f"The HTTP/3 arms did not all measure HTTP/3 as asked ({'; '.join(f['reason'] for f in findings)}"
            f"). Only the costs of those arms are affected.{note}",
            evidence,
            findings,
        )
    return result(
        "http3",
        PASS,
        f"Every HTTP/3 arm negotiated h3 on one QUIC version, lost at most {100 * LOSS_FAIL_SHARE:.0f}% of "
        "its packets, had no stream reset, no Retry change and, for h3_0rtt, every connection's early "
        "data accepted; "
        + ("the generator kept up." if loaded else "the generator's load was not recorded (not judged).")
        + note,
        evidence,
    )
