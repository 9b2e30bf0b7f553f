"""Child process of ``test_client_gevent.py``: the timed client as the engine runs it, under gevent.

Reads a JSON list of cases on stdin, patches like the engine (``gevent.monkey.patch_all``), runs each
case with ``TimedClient`` (``users`` greenlets, ``requests`` each, on the case's TLS ``library``,
system by default) and prints one JSON object: per case, every sample's fields, whether the client
drove its connections directly (``http.cooperative``) and the case's wall time.
"""

from gevent import monkey

monkey.patch_all()

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from workers.engine.http.endpoint import ARM_POLICIES, Endpoint  # noqa: E402
from workers.engine.http.http1 import TimedClient  # noqa: E402
from workers.engine.tls.libraries import make_context  # noqa: E402


def run_user(case: dict, out: list[dict], kinds: set[str]) -> None:
    endpoint = Endpoint.resolve(case["url"])
    library, verify = case.get("library", "system"), case.get("verify", False)
    context = make_context(library, verify, case.get("cafile")) if endpoint.tls else None
    client = TimedClient(
        endpoint, ARM_POLICIES[case["arm"]][1], context, timeout_s=case.get("timeout_s", 10.0)
    )
    path = case.get("path", "/1k")
    for _ in range(case.get("requests", 1)):
        sample = client.request(case["url"], path)
        if client.sock is not None:
            kinds.add(type(client.sock).__name__)
        out.append({**dataclasses.asdict(sample), "coop": client._coop})
    client.close()


def main() -> None:
    results = {}
    for case in json.load(sys.stdin):
        samples: list[dict] = []
        kinds: set[str] = set()
        t0 = time.monotonic()
        gevent.joinall([gevent.spawn(run_user, case, samples, kinds) for _ in range(case.get("users", 1))])
        results[case["name"]] = {"samples": samples, "kinds": sorted(kinds), "wall_s": time.monotonic() - t0}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
