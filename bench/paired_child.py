"""Child process of ``bench/client_paired``: the engine's client and the blocking reference client
taking turns, request by request, in one gevent-patched process.

The engine's ``TimedClient`` runs as in the engine (gevent's hub, connections driven directly: it
uses the ``ssl`` module only for its context, and OpenSSL's socket object through it); the reference
gets the unpatched ``socket`` class and the ``ssl`` module is left unpatched here (gevent's patched
``SSLContext`` cannot make a blocking socket, and the original class recurses once patched), so the
reference blocks in the kernel as a plain Python client does (``ssl`` is imported before patching,
so its ``SSLSocket`` derives from the original socket class). The order within a pair alternates.
Reads one JSON object on stdin (``{"arms": {"<arm>": {"url", "port", "tls"}}, "seconds",
"warmup_pairs", "min_pairs", "path", "tls_library"}``; ``tls_library``: both clients' TLS library,
``system`` or ``bundled``), measures each arm for the seconds and at least
``min_pairs`` pairs, and prints one JSON object: per arm, the lists ``engine_connect_us``,
``engine_ttlb_us``, ``blocking_connect_us``, ``blocking_ttlb_us`` (one entry per pair after the
warm-up pairs).
"""

import ssl  # noqa: F401 - before patching: the reference's SSLSocket on the original socket class

from gevent import monkey

monkey.patch_all(ssl=False)

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from bench.blocking import BundledReference, blocking_context, blocking_request, request_head  # noqa: E402
from workers.engine.client import ARM_POLICIES, Endpoint, TimedClient, make_context  # noqa: E402

ORIGINAL_SOCKET = monkey.get_original("socket", "socket")


def pairs(arm: str, spec: dict, run: dict) -> dict[str, list[int]]:
    seconds, warmup_pairs, path = run["seconds"], run["warmup_pairs"], run["path"]
    least = warmup_pairs + run["min_pairs"]
    endpoint = Endpoint.resolve(spec["url"])
    library = run.get("tls_library", "system")
    client = TimedClient(
        endpoint, ARM_POLICIES[arm][1], make_context(library, False) if spec["tls"] else None
    )
    reference = BundledReference() if library == "bundled" else blocking_context()
    context = reference if spec["tls"] else None
    head = request_head(spec["port"], path)
    out: dict[str, list[int]] = {
        key: [] for key in ("engine_connect_us", "engine_ttlb_us", "blocking_connect_us", "blocking_ttlb_us")
    }
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline or n < least:
        if n % 2:
            reference = blocking_request(spec["port"], context, head, time.perf_counter_ns, ORIGINAL_SOCKET)
            sample = client.request(spec["url"], path)
        else:
            sample = client.request(spec["url"], path)
            reference = blocking_request(spec["port"], context, head, time.perf_counter_ns, ORIGINAL_SOCKET)
        if sample.error:
            raise RuntimeError(f"{arm}: the engine's client failed: {sample.error_detail}")
        n += 1
        if n > warmup_pairs:
            out["engine_connect_us"].append(sample.connect_us)
            out["engine_ttlb_us"].append(sample.ttlb_us)
            out["blocking_connect_us"].append(reference[0])
            out["blocking_ttlb_us"].append(reference[1])
    client.close()
    return out


def main() -> None:
    spec = json.load(sys.stdin)
    result = {arm: pairs(arm, arm_spec, spec) for arm, arm_spec in spec["arms"].items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
