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


def make_run(
    owner,
    *,
    status: str = Run.Status.SUCCEEDED,
    arms: dict[str, list[int]] | None = None,
    target_name: str = "t",
    seconds: int = 0,
    summarize: bool = False,
    created=None,
) -> Run:
    """``seconds``: also store a per-second series (that many points, each at the arm's median), so
    costs get per-second intervals; ``summarize``: write the run's summary as a finished run has."""
    target, _ = Target.objects.get_or_create(
        owner=owner,
        plain_url=f"http://127.0.0.1:1/{target_name}",
        tls_url=f"https://127.0.0.1:2/{target_name}",
        defaults={"name": target_name},
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
            series=[
                {
                    "t_s": t + 1,
                    "requests": len(values) // max(seconds, 1),
                    "failures": 0,
                    "p50_us": sorted(values)[len(values) // 2] + (t % 3),
                    "p95_us": max(values),
                    "p99_us": max(values),
                    "users": 2,
                    "gen_cpu_pct": 20.0,
                    "loop_lag_ms": 0.2,
                }
                for t in range(seconds)
            ],
            started=now,
            finished=now,
        )
    if created is not None:
        Run.objects.filter(pk=run.pk).update(created=created)
        run.refresh_from_db()
    if summarize:
        from portal.runs.reporting import summarize as summary_of

        Run.objects.filter(pk=run.pk).update(summary=summary_of(run))
        run.refresh_from_db()
    return run
