"""Run inside a network namespace by ``test_wan_netem``: nginx on the namespace's loopback, the
engine's arms (and the protocol matrix's sub-arms) once without delay and once under ``tc netem
delay`` (added here, on this namespace's ``lo`` only), printing one JSON object: each run's per-arm
figures, the TLS facts and the measured variants' negotiated parameters.

    ip netns exec NS python -m tests.workers.netem_child RTT_MS
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.nginx import Nginx
from portal.lib import hdr

ARMS = ("plain", "tls", "plain_new", "tls_new", "tls_resumed")
# The protocol matrix adds tls_new@1.2 / tls_new@1.3 (and tls@1.2 / tls@1.3): nginx negotiates TLS 1.3
# by default, so without it the model's TLS 1.2 full handshake (2 round trips) would go unchecked.
MATRIX = ["protocol"]
DURATION_S = 3.0


def engine(nginx: Nginx) -> dict:
    config = {
        "arms": [
            {"name": a, "url": nginx.tls_url("/1k") if "tls" in a else nginx.plain_url("/1k")} for a in ARMS
        ],
        "users": 1,
        "spawn_rate": 10,
        "warmup_s": 0.5,
        "duration_s": DURATION_S,
        "verify_tls": False,
        "tls_matrix": MATRIX,
    }
    proc = subprocess.run(  # noqa: S603 - this interpreter, the engine module
        [sys.executable, "-m", "workers.engine"],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    out: dict = {"arms": {}, "tls_info": None, "variants": {}}
    for line in proc.stdout.splitlines():
        message = json.loads(line)
        if message["type"] == "tls_info":
            out["tls_info"] = message["info"]
        elif message["type"] == "matrix":
            for entry in message["variants"]:
                if entry["status"] == "measured":
                    out["variants"][entry["name"]] = entry["negotiated"]
        elif message["type"] == "arm":
            result = message["result"]
            out["arms"][message["arm"]] = {
                "ttlb_us": hdr.summary(hdr.decode(result["hist"]["ttlb_us"])),
                "connections_opened": result["connections_opened"],
                "tls_sessions_reused": result["tls_sessions_reused"],
                "response_bytes": result["response_bytes"],
                "failures": result["failures"],
            }
    return out


def main(rtt_ms: float) -> None:
    with Nginx() as nginx:
        base = engine(nginx)
        delay = f"{rtt_ms / 2:g}ms"  # each direction crosses lo once: RTT = 2 × delay
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", delay], check=True)  # noqa: S607
        delayed = engine(nginx)
    print(json.dumps({"base": base, "delayed": delayed}))


if __name__ == "__main__":
    main(float(sys.argv[1]))
