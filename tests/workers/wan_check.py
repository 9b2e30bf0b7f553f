"""What the WAN model's checks share (``test_wan_netem`` through ``netem_child``, ``test_wan_relay``,
``test_wan_relay_quic``): one run of the real engine's arms and the TLS matrix's sub-arms against a
plain and a TLS URL (the HTTP/3 arms take the TLS URL, over UDP),
reduced to each arm's figures, and the comparison of a delayed run with the projection
``portal.lib.stats.wan`` makes from the same arms measured without delay."""

from __future__ import annotations

from portal.lib.stats import hdr, wan
from portal.lib.stats.generators import merge_quic
from tests.conftest import run_engine
from tests.engine_config import engine_config

ARMS = ("plain", "tls", "plain_new", "tls_new", "tls_resumed")
# The protocol matrix adds tls_new@1.2 / tls_new@1.3 (and tls@1.2 / tls@1.3 with the tls arm): the
# servers negotiate TLS 1.3 by default, so without it the model's TLS 1.2 full handshake (2 round
# trips) would go unchecked.
MATRIX = ("protocol",)
DURATION_S = 3.0
WARMUP_S = 0.5
TOLERANCE = 0.10


def _url(arm: str, plain_url: str, tls_url: str) -> str:
    return tls_url if "tls" in arm or arm in wan.HTTP3_ARMS else plain_url


def measure(
    plain_url: str,
    tls_url: str,
    *,
    arms: tuple[str, ...] = ARMS,
    matrix: tuple[str, ...] = MATRIX,
    duration_s: float = DURATION_S,
    warmup_s: float = WARMUP_S,
    rounds: int = 1,
) -> dict:
    """The engine's ``arms`` (with the TLS matrix's ``matrix`` dimensions), closed loop with 1 user,
    interleaved in ``rounds``: ``{"arms": {name: figures of its rounds merged}, "tls_info",
    "variants": {sub-arm: negotiated}}``. Raises AssertionError when the engine fails."""
    config = engine_config(
        [{"name": a, "url": _url(a, plain_url, tls_url)} for a in arms],
        warmup_s=warmup_s,
        duration_s=duration_s,
        rounds=rounds,
        tls_matrix=list(matrix),
    )
    messages, code, stderr = run_engine(config, timeout=180)
    assert code == 0, stderr[-2000:]
    out: dict = {"arms": {}, "tls_info": None, "variants": {}}
    results: dict[str, list[dict]] = {}
    for message in messages:
        if message["type"] == "tls_info":
            out["tls_info"] = message["info"]
        elif message["type"] == "matrix":
            for entry in message["variants"]:
                if entry["status"] == "measured":
                    out["variants"][entry["name"]] = entry["negotiated"]
        elif message["type"] == "arm":
            results.setdefault(message["arm"], []).append(message["result"])
    for name, items in results.items():
        sizes = [r["response_bytes"][k] for r in items for k in ("min", "max") if r["response_bytes"][k]]
        out["arms"][name] = {
            "ttlb_us": hdr.summary(hdr.merge(r["hist"]["ttlb_us"] for r in items)),
            "rounds": len(items),
            "connections_opened": sum(r["connections_opened"] for r in items),
            "tls_sessions_reused": sum(r["tls_sessions_reused"] for r in items),
            "response_bytes": {"min": min(sizes, default=None), "max": max(sizes, default=None)},
            "failures": sum(r["failures"] for r in items),
            "quic": merge_quic([r.get("quic") for r in items]),
        }
    assert set(arms) | set(out["variants"]) == set(out["arms"]), (arms, out["variants"], out["arms"])
    return out


def compare(base: dict, delayed: dict, rtt_ms: float) -> list[dict]:
    """Per arm and sub-arm: the delayed run's measured TTLB p50 and the projection at ``rtt_ms`` from
    the base run's p50 (``portal.lib.stats.wan.arm_model``). The resumed share (and an HTTP/3 arm's QUIC
    facts: handshakes, resumed, early data, flights) comes from the delayed run's own arm (the same
    connection policy); the TLS facts and flights from the base run."""
    tls_info = base["tls_info"]
    if any(wan.base_arm(name) not in wan.HTTP3_ARMS for name in base["arms"]):
        assert tls_info and tls_info["protocol"] in ("TLSv1.2", "TLSv1.3") and tls_info["chain_bytes"]
    assert set(base["variants"]) == set(delayed["variants"]) and set(base["arms"]) == set(delayed["arms"])
    rows = []
    for name in base["arms"]:
        before, after = base["arms"][name], delayed["arms"][name]
        assert before["failures"] == after["failures"] == 0, (name, before["failures"], after["failures"])
        negotiated = base["variants"].get(name)
        model = wan.arm_model(name, {**after, "ttlb_us": before["ttlb_us"]}, tls_info, negotiated)
        if name in ("tls_new@1.2", "tls_new@1.2+full"):
            assert model["protocol"] == "TLSv1.2" and model["tls"] == 2, model
        if name == "tls_resumed" or "+ticket" in name or "+sessid" in name:
            # Resumption really happened, or the resumed round trip would go unchecked.
            assert model["resumed_share"] > 0.5, (name, model)
        rows.append(
            {
                "arm": name,
                "rtt_ms": rtt_ms,
                "base_ms": model["measured_ttlb_p50_ms"],
                "measured_ms": round(after["ttlb_us"]["p50"] / 1000.0, 3),
                "measured_count": after["ttlb_us"]["count"],
                "projected_ms": round(model["measured_ttlb_p50_ms"] + model["round_trips"] * rtt_ms, 3),
                "round_trips": model["round_trips"],
                "model": model,
            }
        )
    return rows


def assert_within(rows: list[dict], tolerance: float = TOLERANCE) -> None:
    """Every arm's measured TTLB p50 within ``tolerance`` of its projection (all arms are checked
    before failing, so the message shows every figure)."""
    off = [r for r in rows if abs(r["measured_ms"] - r["projected_ms"]) > tolerance * r["projected_ms"]]
    assert not off, "\n".join(describe(r) for r in rows)


def describe(row: dict) -> str:
    error_pct = 100.0 * (row["measured_ms"] - row["projected_ms"]) / row["projected_ms"]
    return (
        f"{row['arm']} at {row['rtt_ms']:g} ms: measured {row['measured_ms']:.2f} ms "
        f"(n={row['measured_count']}) vs projected {row['projected_ms']:.2f} ms "
        f"= {row['base_ms']:.2f} + {row['round_trips']:g} × {row['rtt_ms']:g} ({error_pct:+.1f}%)"
    )
