"""Child process of ``bench/client_paired``: the engine's client and the blocking reference client
taking turns, request by request, in one gevent-patched process.

The engine's ``TimedClient`` runs as in the engine (gevent's hub, connections driven directly: it
uses the ``ssl`` module only for its context, and OpenSSL's socket object through it); the reference
gets the unpatched ``socket`` class and the ``ssl`` module is left unpatched here (gevent's patched
``SSLContext`` cannot make a blocking socket, and the original class recurses once patched), so the
reference blocks in the kernel as a plain Python client does (``ssl`` is imported before patching,
so its ``SSLSocket`` derives from the original socket class). The order within a pair alternates.
The keep-alive HTTP/1.1 arms (``plain``, ``tls``) pair the engine's single loop, which makes those
arms' requests in the engine, with ``bench.blocking.BlockingKept`` on its own kept connection: TTLB
only, the reference's request made as the loop picks the next path (``kept_pairs``).
The HTTP/2 arms (``h2_new``: a new connection per request, ``h2``: one kept connection) pair the
engine's ``H2Client`` with ``bench.blocking.BlockingH2``, the same ``jh2`` library on a blocking
socket; on ``h2`` only TTLB is paired (no connect after the first request). The HTTP/3 arms (``h3_new``,
``h3``; Caddy's QUIC) pair the engine's ``H3Client`` with ``bench.blocking_h3.BlockingH3``, the same
qh3 configuration on a blocking UDP socket: TTLB only (a QUIC connection has no connect of its own).
Reads one JSON object on stdin (``{"arms": {"<arm>": {"url", "port", "tls"}}, "seconds",
"warmup_pairs", "min_pairs", "path", "tls_library"}``; ``tls_library``: both clients' TLS library,
``system`` or ``bundled``), measures each arm for the seconds and at least
``min_pairs`` pairs, and prints one JSON object: per arm, the lists ``engine_connect_us``,
``engine_ttlb_us``, ``blocking_connect_us``, ``blocking_ttlb_us`` (one entry per pair after the
warm-up pairs; no connect lists on the kept connections' arms).
"""

import ssl  # noqa: F401 - before patching: the reference's SSLSocket on the original socket class

from gevent import monkey

monkey.patch_all(ssl=False)

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from gevent.event import Event  # noqa: E402

from bench.blocking import (  # noqa: E402
    BlockingH2,
    BlockingKept,
    BundledReference,
    blocking_context,
    blocking_request,
    request_head,
)
from bench.blocking_h3 import BlockingH3  # noqa: E402
from workers.engine.http.by_protocol import new_client  # noqa: E402
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint  # noqa: E402
from workers.engine.http.http3.quic import make_settings  # noqa: E402
from workers.engine.http.single_loop import SingleLoop  # noqa: E402
from workers.engine.tls.libraries import (  # noqa: E402
    H2,
    HTTP1,
    make_context,  # noqa: E402
)

ORIGINAL_SOCKET = monkey.get_original("socket", "socket")


def pairs(arm: str, spec: dict, run: dict) -> dict[str, list[int]]:
    seconds, warmup_pairs, path = run["seconds"], run["warmup_pairs"], run["path"]
    least = warmup_pairs + run["min_pairs"]
    endpoint = Endpoint.resolve(spec["url"])
    library = run.get("tls_library", "system")
    policy = ARM_POLICIES[arm][1]
    if policy.http3:
        return h3_pairs(arm, spec, run, endpoint, policy)
    alpn = H2 if policy.http2 else HTTP1
    client = new_client(endpoint, policy, make_context(library, False, alpn=alpn) if spec["tls"] else None)
    reference = BundledReference(alpn) if library == "bundled" else blocking_context(alpn=alpn)
    context = reference if spec["tls"] else None
    if not (policy.http2 or policy.new_connection_per_request):
        return kept_pairs(
            spec,
            run,
            client,
            BlockingKept(spec["port"], context, path, time.perf_counter_ns, ORIGINAL_SOCKET),
        )
    if policy.http2:
        h2_reference = BlockingH2(spec["port"], context, path, time.perf_counter_ns, ORIGINAL_SOCKET)

        def blocking() -> tuple[int | None, int]:
            return h2_reference.request(policy.new_connection_per_request)
    else:
        head = request_head(spec["port"], path)

        def blocking() -> tuple[int | None, int]:
            return blocking_request(spec["port"], context, head, time.perf_counter_ns, ORIGINAL_SOCKET)

    phases = ("connect_us", "ttlb_us") if policy.new_connection_per_request else ("ttlb_us",)
    out: dict[str, list[int]] = {f"{who}_{phase}": [] for who in ("engine", "blocking") for phase in phases}
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline or n < least:
        if n % 2:
            theirs = blocking()
            sample = client.request(spec["url"], path)
        else:
            sample = client.request(spec["url"], path)
            theirs = blocking()
        if sample.error or sample.status != 200:
            raise RuntimeError(f"{arm}: the engine's client failed: {sample.error_detail or sample.status}")
        n += 1
        if n > warmup_pairs:
            mine = {"connect_us": sample.connect_us, "ttlb_us": sample.ttlb_us}
            for phase, value in zip(("connect_us", "ttlb_us"), theirs, strict=True):
                if phase in phases:
                    out[f"engine_{phase}"].append(mine[phase])
                    out[f"blocking_{phase}"].append(value)
    client.close()
    if policy.http2:
        h2_reference.close()
    return out


def kept_pairs(spec: dict, run: dict, client, reference: BlockingKept) -> dict[str, list[int]]:
    """``pairs`` for a keep-alive HTTP/1.1 arm (``plain``, ``tls``), TTLB only: the engine's requests
    made by its single loop, as the engine makes them (``workers/engine/http/single_loop.py``), after
    the client's first request opened the connection, as a user's does. The loop asks for each
    request's path (``pick``) right before it sends it: the reference's request runs there, blocking
    the process, so the two take turns, the reference first in every pair."""
    path, least = run["path"], run["warmup_pairs"] + run["min_pairs"]
    theirs: list[int] = []
    mine: list[int] = []
    statuses: list[int] = []  # the engine's answers other than 200
    enough = Event()
    deadline = time.monotonic() + run["seconds"]

    def pick() -> str:
        theirs.append(reference.request()[1])
        return path

    def record_answer(url, start_ns, ttfb_us, ttlb_us, head, ok) -> None:
        if not ok:  # another answer than the reference's 200 is other work: no pair
            statuses.append(head.status)
            enough.set()
            return
        mine.append(ttlb_us)
        if len(mine) >= least and time.monotonic() >= deadline:
            enough.set()

    first = client.request(spec["url"], path)
    if first.error or first.status != 200:
        raise RuntimeError(f"the engine's client failed: {first.error_detail or first.status}")
    loop = SingleLoop(pick, record_answer, lambda status: status == 200)
    driving = gevent.spawn(loop.drive, client)
    try:
        while not enough.wait(0.5):
            if driving.ready():  # the loop handed the request back: it failed or was not plain
                raise RuntimeError(f"the single loop handed a request back: {driving.value!r}"[:300])
    finally:
        driving.kill()
        client.close()
        reference.close()
    if statuses:
        raise RuntimeError(f"the engine's single loop was answered {statuses[0]}, not 200")
    n = len(mine)
    return {
        "engine_ttlb_us": mine[run["warmup_pairs"] : n],
        "blocking_ttlb_us": theirs[run["warmup_pairs"] : n],
    }


def h3_pairs(arm: str, spec: dict, run: dict, endpoint: Endpoint, policy) -> dict[str, list[int]]:
    """``pairs`` for an HTTP/3 arm: TTLB of the engine's ``H3Client`` and of ``BlockingH3``."""
    settings = make_settings(False)
    client = new_client(endpoint, policy, settings)
    reference = BlockingH3(spec["port"], settings=settings, socket_cls=ORIGINAL_SOCKET)
    new, path = policy.new_connection_per_request, run["path"]
    least = run["warmup_pairs"] + run["min_pairs"]
    out: dict[str, list[int]] = {"engine_ttlb_us": [], "blocking_ttlb_us": []}
    deadline = time.monotonic() + run["seconds"]
    n = 0
    try:
        while time.monotonic() < deadline or n < least:
            if n % 2:
                status, _, theirs = reference.request(path, new=new)
                sample = client.request(spec["url"], path)
            else:
                sample = client.request(spec["url"], path)
                status, _, theirs = reference.request(path, new=new)
            if sample.error or sample.status != 200:
                said = sample.error_detail or sample.status
                raise RuntimeError(f"{arm}: the engine's client failed: {said}")
            if status != 200:
                raise RuntimeError(f"{arm}: the blocking reference was answered {status}, not 200")
            n += 1
            if n > run["warmup_pairs"]:
                out["engine_ttlb_us"].append(sample.ttlb_us)
                out["blocking_ttlb_us"].append(theirs)
    finally:
        client.close()
        reference.close()
    return out


def main() -> None:
    spec = json.load(sys.stdin)
    result = {arm: pairs(arm, arm_spec, spec) for arm, arm_spec in spec["arms"].items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
