"""Child process of ``test_http3_gevent.py``: the HTTP/3 client as the engine runs it, under gevent.

Reads a JSON list of cases on stdin, patches like the engine (``gevent.monkey.patch_all``), runs each
case with ``H3Client`` (``users`` greenlets, each with ``streams`` lanes sharing its connection,
``requests`` per lane) and prints one JSON object: per case every sample's fields, every connection's
final facts (``on_connection_end``), whether the client waited on the hub (``coop``) and its wall time.
"""

from gevent import monkey

monkey.patch_all()

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402

from workers.engine.http.endpoint import Endpoint  # noqa: E402
from workers.engine.http.http3.client import H3_ARMS, H3Client  # noqa: E402
from workers.engine.http.http3.quic import make_settings  # noqa: E402


def run_user(case: dict, samples: list[dict], ended: list[dict], coop: list[bool]) -> None:
    port = case["port"]
    endpoint = Endpoint("https", "127.0.0.1", port, "127.0.0.1", f"127.0.0.1:{port}")
    policy, early = H3_ARMS[case["arm"]]
    client = H3Client(
        endpoint,
        policy,
        make_settings(case.get("verify", False), case.get("cafile")),
        early_data=early,
        streams=case.get("streams", 1),
        handshake_timeout_s=case.get("handshake_timeout_s"),
        on_connection_end=lambda facts: ended.append(dataclasses.asdict(facts)),
    )
    coop.append(client._coop)
    path = case.get("path", "/1k")

    def lane() -> None:
        for _ in range(case.get("requests", 1)):
            sample = client.request(f"https://127.0.0.1:{port}{path}", path)
            samples.append(dataclasses.asdict(sample))

    gevent.joinall([gevent.spawn(lane) for _ in range(client.streams)])
    client.close()


def main() -> None:
    results = {}
    for case in json.load(sys.stdin):
        samples: list[dict] = []
        ended: list[dict] = []
        coop: list[bool] = []
        t0 = time.monotonic()
        users = [gevent.spawn(run_user, case, samples, ended, coop) for _ in range(case.get("users", 1))]
        gevent.joinall(users, raise_error=True)
        results[case["name"]] = {
            "samples": samples,
            "ended": ended,
            "coop": all(coop),
            "wall_s": time.monotonic() - t0,
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
