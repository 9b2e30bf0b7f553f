"""Stored runs for view tests: real encoded histograms built from given latencies (the rows are made
by ``bench/samples.py``, which the benchmarks' seeds use too)."""

from __future__ import annotations

from django.utils import timezone

from bench import samples
from bench.samples import encoded
from portal.projects.models import personal_project
from portal.runs.models import ArmResult, Run, RunAttempt
from portal.targets.models import Target

# A run form the portal accepts (loopback URLs, two arms, a short window): the base of the bad-input
# tests and of the form fuzzer, which change one part of it at a time.
VALID_FORM = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["plain", "tls"],
    "users": "2",
    "spawn_rate": "2",
    "warmup_s": "1",
    "duration_s": "3",
}


def make_run(
    owner,
    *,
    status: str = Run.Status.SUCCEEDED,
    arms: dict[str, list[int]] | None = None,
    target_name: str = "t",
    seconds: int = 0,
    summarize: bool = False,
    created=None,
    server_cpu_ms: dict[str, float] | None = None,
    probes: dict | None = None,
    local_cpu_ms: dict[str, float] | None = None,
    project=None,
    rounds: int = 1,
    quic: dict[str, dict] | None = None,
) -> Run:
    """``seconds``: also store a per-second series (that many points, each at the arm's median), so
    costs get per-second intervals; ``summarize``: write the run's summary as a finished run has;
    ``server_cpu_ms``: server CPU-ms per request per arm, stored as a probe's 10-point window;
    ``local_cpu_ms``: the same for a local process sampled on the generator host; ``project``: where
    the run and its target go (default: the owner's personal project); ``rounds``: each arm stored
    that many times, one row per round with the same figures (3 give every cost an interval over
    rounds, server CPU's too); ``quic``: an HTTP/3 arm's ``result.quic`` by arm name."""
    target, _ = Target.objects.get_or_create(
        project=project or personal_project(owner),
        plain_url=f"http://127.0.0.1:1/{target_name}",
        tls_url=f"https://127.0.0.1:2/{target_name}",
        defaults={"name": target_name},
    )
    arms = arms if arms is not None else {"plain": [400] * 100, "tls": [500] * 100, "tls_new": [3000] * 100}
    https = [name for name in arms if "tls" in name or name.startswith("h3")]
    urls = {name: target.tls_url if name in https else target.plain_url for name in arms}
    run = samples.new_run(
        owner,
        target,
        urls,
        users=2,
        warmup_s=1,
        duration_s=10,
        verify_tls=False,
        status=status,
        probes=probes,
    )
    rows = [
        samples.arm_row(
            run,
            name,
            number * len(arms) + position,
            round=number,
            requests=len(values),
            ttfb_hist=encoded([v // 2 for v in values]),
            ttlb_hist=encoded(values),
            connections_reopened=0,
            series=_series(values, seconds),
            quic=(quic or {}).get(name),
            server_cpu={
                **_server_cpu(server_cpu_ms, name, len(values)),
                **_local_cpu(local_cpu_ms, name, len(values)),
            },
        )
        for number in range(rounds)
        for position, (name, values) in enumerate(arms.items())
    ]
    ArmResult.objects.bulk_create(rows)
    if created is not None:
        Run.objects.filter(pk=run.pk).update(created=created)
        run.refresh_from_db()
    if summarize:
        from portal.runs.reporting import summarize as summary_of

        Run.objects.filter(pk=run.pk).update(summary=summary_of(run))
        run.refresh_from_db()
    return run


def _series(values: list[int], seconds: int) -> list[dict]:
    return [
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
    ]


def _server_cpu(per_req: dict[str, float] | None, arm: str, requests: int) -> dict:
    if not per_req or arm not in per_req:
        return {}
    cpu_s = per_req[arm] * requests / 1000.0
    pct = [round(100.0 * cpu_s / 10, 1) + (i % 3) for i in range(10)]
    return {
        "server_cpu": {
            "cpu_s": cpu_s,
            "window_s": 10.0,
            "samples": 10,
            "processes": 2,
            "host_cpu_pct": 40.0,
            "cpu_ms_per_req": per_req[arm],
            "process": "nginx",
            "timeline": [
                {"epoch_s": 1000.0 + i, "cpu_pct": v, "threads": 2, "host_cpu_pct": 40.0}
                for i, v in enumerate(pct)
            ],
            "cpu_pct_ma15": [round(sum(pct[: i + 1]) / (i + 1), 1) for i in range(10)],
        }
    }


def _local_cpu(per_req: dict[str, float] | None, arm: str, requests: int) -> dict:
    if not per_req or arm not in per_req:
        return {}
    window = {"cpu_s": per_req[arm] * requests / 1000.0, "window_s": 10.0, "samples": 10}
    return {"generator_cpu": {**window, "cpu_ms_per_req": per_req[arm], "process": "tollgate-demo"}}


def open_attempt(run: Run, number: int = 1, **fields) -> RunAttempt:
    """``run`` running in its open attempt ``number`` (earlier ones ended lost), as a claim leaves it;
    ``fields``: the attempt's own (``heartbeat``, ``worker``, ``current_arm``, ``deadline`` …)."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started=run.started or now)
    for earlier in range(1, number):
        RunAttempt.objects.create(
            run=run, number=earlier, worker="celery@before pid 1", host="h", claimed=now, heartbeat=now,
            ended=now, outcome="lost",
        )  # fmt: skip
    defaults = {"worker": "celery@h pid 1", "host": "h", "claimed": now, "heartbeat": now}
    return RunAttempt.objects.create(run=run, number=number, **(defaults | fields))
