"""Child process of ``test_single_loop.py``: an arm's users as the engine makes them
(``users.arm_user_class`` under a Locust local runner, gevent patched as in the engine), with the
single loop on or off (``single_loop.ENABLED``).

Reads one JSON case on stdin (``url``, ``arm``, ``users``, ``seconds``, ``single``, optional
``library``, ``timeout_s``); prints one JSON object: every recorded request's fields (with ``ok``, the
arm's verdict on its status, and ``by``: recorded by its user or by the loop, ``Kept``), the arm
recorder's counts (its window open from the start), the loop's counts (None when it did not apply),
the sockets this process still held after the runner quit, and whether the loop's greenlet had
ended by then.
"""

from gevent import monkey

monkey.patch_all()

import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.event import Events  # noqa: E402

from workers.engine.http import single_loop  # noqa: E402
from workers.engine.http.by_protocol import client_factory  # noqa: E402
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint, split_target  # noqa: E402
from workers.engine.http.sample import Sample  # noqa: E402
from workers.engine.recording.recorder import ArmRecorder  # noqa: E402
from workers.engine.tls.libraries import make_context  # noqa: E402
from workers.engine.users import arm_user_class  # noqa: E402


def sockets() -> int:
    """This process's open sockets."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


class Kept(ArmRecorder):
    """The arm's own recorder, keeping each request as its fields besides: a ``Sample`` recorded (a
    user's request, or one the loop handed back) as it is, an answer the loop recorded without one
    (``record_answer``) as the ``Sample`` the client would have made of it (``by``: who recorded it)."""

    def __init__(self, arm: str) -> None:
        super().__init__(arm)
        self.samples: list[dict] = []

    def record(self, sample: Sample, expected_ok: bool) -> None:
        self.samples.append({**dataclasses.asdict(sample), "ok": expected_ok, "by": "user"})
        super().record(sample, expected_ok)

    def record_answer(self, url, start_ns, ttfb_us, ttlb_us, head, expected_ok) -> None:
        sample = Sample(url, start_ns, start_ns + ttlb_us * 1000, head.status, head.length)
        sample.location, sample.server, sample.content_type, sample.content_encoding = head.noted
        sample.ttfb_us, sample.ttlb_us = ttfb_us, ttlb_us
        self.samples.append({**dataclasses.asdict(sample), "ok": expected_ok, "by": "loop"})
        super().record_answer(url, start_ns, ttfb_us, ttlb_us, head, expected_ok)


def main() -> None:
    case = json.load(sys.stdin)
    single_loop.ENABLED = case["single"]
    endpoint = Endpoint.resolve(case["url"])
    policy = ARM_POLICIES[case["arm"]][1]
    context = make_context(case.get("library", "system"), False, None) if endpoint.tls else None
    path = split_target(case["url"])
    recorder = Kept(case["arm"])
    recorder.start_window()
    new_client, lanes = client_factory(endpoint, policy, context, case.get("timeout_s", 10.0), {}, 1)
    user_class = arm_user_class(
        case["arm"], new_client, lambda: path, recorder, lambda status: 200 <= status < 300, 0, 0.0, lanes
    )
    before = sockets()
    env = Environment(user_classes=[user_class], events=Events())
    runner = env.create_local_runner()
    runner.start(case.get("users", 2), spawn_rate=100)
    gevent.sleep(case.get("seconds", 1.0))
    runner.quit()
    gevent.sleep(0.05)  # the loop sees its last user leave within its yield interval
    loop = user_class.single_loop
    print(
        json.dumps(
            {
                "samples": recorder.samples,
                "result": {key: recorder.result()[key] for key in ("requests", "failures", "status_codes")},
                "loop": {"requests": loop.requests, "handed_back": loop.handed_back} if loop else None,
                "loop_ended": loop is None or loop._greenlet is None,
                "sockets_left": sockets() - before,
            }
        )
    )


if __name__ == "__main__":
    main()
