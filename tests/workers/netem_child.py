"""Run inside a network namespace by ``test_wan_netem``: nginx on the namespace's loopback, the
engine's arms (and the protocol matrix's sub-arms) once without delay and once under ``tc netem
delay`` (added here, on this namespace's ``lo`` only), printing one JSON object: each run's per-arm
figures, the TLS facts and the measured variants' negotiated parameters (``wan_check.measure``).

    ip netns exec NS python -m tests.workers.netem_child RTT_MS
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.nginx import Nginx
from tests.workers.wan_check import measure


def main(rtt_ms: float) -> None:
    with Nginx() as nginx:
        base = measure(nginx.plain_url("/1k"), nginx.tls_url("/1k"))
        delay = f"{rtt_ms / 2:g}ms"  # each direction crosses lo once: RTT = 2 × delay
        subprocess.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", delay], check=True)  # noqa: S607
        delayed = measure(nginx.plain_url("/1k"), nginx.tls_url("/1k"))
    print(json.dumps({"base": base, "delayed": delayed}))


if __name__ == "__main__":
    main(float(sys.argv[1]))
