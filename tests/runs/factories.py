"""Stored runs for view tests: real encoded histograms built from given latencies."""

from __future__ import annotations

from django.utils import timezone

from portal.lib import hdr
from portal.runs.models import ArmResult, Run
from portal.targets.models import Target


def encoded(values: list[int]) -> str:
    h = hdr.new_histogram()
    for v in values:
        h.record_value(v)
    return h.encode().decode("ascii")


def make_run(owner, *, status: str = Run.Status.SUCCEEDED, arms: dict[str, list[int]] | None = None) -> Run:
    target, _ = Target.objects.get_or_create(
        owner=owner,
        plain_url="http://127.0.0.1:1/1k",
        tls_url="https://127.0.0.1:2/1k",
        defaults={"name": "t"},
    )
    arms = arms if arms is not None else {"plain": [400] * 100, "tls": [500] * 100, "tls_new": [3000] * 100}
    config = {
        "arms": [
            {"name": name, "url": target.tls_url if "tls" in name else target.plain_url} for name in arms
        ],
        "users": 2,
        "spawn_rate": 2,
        "warmup_s": 1,
        "duration_s": 10,
        "verify_tls": False,
    }
    now = timezone.now()
    run = Run.objects.create(
        owner=owner, target=target, config=config, status=status, started=now, finished=now
    )
    for position, (name, values) in enumerate(arms.items()):
        ArmResult.objects.create(
            run=run,
            arm=name,
            position=position,
            url=config["arms"][position]["url"],
            users=2,
            warmup_s=1,
            duration_s=10,
            requests=len(values),
            failures=0,
            rps=len(values) / 10,
            ttfb_hist=encoded([v // 2 for v in values]),
            ttlb_hist=encoded(values),
            status_codes={"200": len(values)},
            response_bytes_min=1024,
            response_bytes_max=1024,
            started=now,
            finished=now,
        )
    return run
