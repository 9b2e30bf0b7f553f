"""Stored runs made from given latencies, for the benchmarks (``bench/portal_load_seed.py``,
``bench/report_speed``) and the tests (``tests/runs/factories.py``): a finished Run with its config
and its ArmResult rows, whose histograms are real HDR encodings in the engine's shape (1 µs … 60 s,
3 digits; ``portal.lib.stats.hdr``). Nothing here runs in the product, so it lives with the benchmarks;
the callers choose the latencies, the shape of the run and how it ends (summary, report section,
frozen report)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from django.utils import timezone

from portal.lib.stats import hdr
from portal.runs.models import ArmResult, Run

# The benchmarks' runs, per arm: (median TTLB µs, connect µs or None, handshake µs or None).
ARMS = {
    "plain": (450, None, None),
    "tls": (520, None, None),
    "plain_new": (700, 90, None),
    "tls_new": (2300, 95, 1400),
    "tls_resumed": (1500, 95, 700),
}


def encoded(values: Iterable[int], count: int = 1) -> str:
    """The encoded HDR histogram of ``values``, each recorded ``count`` times."""
    h = hdr.new_histogram()
    for v in values:
        h.record_value(v, count)
    return h.encode().decode("ascii")


def drawn(rng: random.Random, median_us: int, distinct: int, requests: int) -> str:
    """An encoded histogram of ``requests`` latencies around ``median_us`` with a tail: ``distinct``
    draws from a log-normal (one in 500 twenty times slower, as real runs have), each recorded
    ``requests // distinct`` times, kept inside the histogram's range."""
    values = []
    for _ in range(distinct):
        value = int(median_us * rng.lognormvariate(0.0, 0.35))
        if rng.random() < 0.002:
            value *= 20
        values.append(min(max(value, hdr.HIST_MIN_US), hdr.HIST_MAX_US))
    return encoded(values, requests // distinct)


def drawn_series(rng: random.Random, median_us: int, seconds: int, requests: int, users: int) -> list[dict]:
    """A per-second series of ``seconds`` points around ``median_us``, ``requests`` in all (± 40 a
    second), with the generator's own figures (CPU, run queue, loop lag) in a healthy range."""
    per_s = requests // seconds
    return [
        {
            "t_s": t + 1,
            "requests": per_s + rng.randint(-40, 40),
            "failures": 0,
            "p50_us": int(median_us * rng.uniform(0.97, 1.03)),
            "p95_us": int(median_us * rng.uniform(1.7, 1.9)),
            "p99_us": int(median_us * rng.uniform(2.4, 2.9)),
            "users": users,
            "gen_cpu_pct": round(rng.uniform(30, 45), 1),
            "gen_runq_pct": round(rng.uniform(0, 3), 1),
            "loop_lag_ms": round(rng.uniform(0.1, 0.8), 2),
        }
        for t in range(seconds)
    ]


def new_run(
    owner,
    target,
    urls: dict[str, str],
    *,
    users: int,
    warmup_s: int,
    duration_s: int,
    status: str = Run.Status.SUCCEEDED,
    probes: dict | None = None,
    **config,
) -> Run:
    """A ``status`` run of ``target`` by ``owner`` in the target's project, one arm per ``urls``
    entry (name: URL, in order), started and finished now; ``config``: the rest of its config
    (``rounds``, ``verify_tls`` …)."""
    config = {
        "arms": [{"name": name, "url": url} for name, url in urls.items()],
        "users": users,
        "spawn_rate": users,
        "warmup_s": warmup_s,
        "duration_s": duration_s,
        **config,
    }
    now = timezone.now()
    return Run.objects.create(
        project_id=target.project_id,
        owner=owner,
        target=target,
        config=config,
        status=status,
        started=now,
        finished=now,
        probes=probes or {},
    )


def arm_row(run: Run, name: str, position: int, *, requests: int, **fields) -> ArmResult:
    """An unsaved ArmResult of ``run``: arm ``name`` at ``position``, ``requests`` answered 200 with
    1 KiB bodies and no failures, over the run's own window (users, warm-up, duration and URL from
    its config); ``fields``: the rest (histograms, series, ``round``, connections …)."""
    config = run.config
    duration_s = config["duration_s"]
    return ArmResult(
        run=run,
        arm=name,
        position=position,
        url=next(arm["url"] for arm in config["arms"] if arm["name"] == name),
        users=config["users"],
        warmup_s=config["warmup_s"],
        duration_s=duration_s,
        requests=requests,
        failures=0,
        rps=requests / duration_s,
        status_codes={"200": requests},
        response_bytes_min=1024,
        response_bytes_max=1024,
        started=run.started,
        finished=run.finished,
        **fields,
    )


def drawn_run(owner, target, rng: random.Random, *, rounds: int, seconds: int, requests: int, distinct: int,
              users: int, verify_tls: bool) -> Run:  # fmt: skip
    """A succeeded run of ``ARMS`` × ``rounds`` interleaved rounds, ``requests`` per arm and round
    over ``seconds`` measured seconds (10 s warm-up), its latencies drawn from ``rng`` (``distinct``
    draws per histogram) around each arm's medians; not ended: the caller stores what it needs."""
    urls = {name: target.tls_url if name.startswith("tls") else target.plain_url for name in ARMS}
    run = new_run(
        owner,
        target,
        urls,
        users=users,
        warmup_s=10,
        duration_s=seconds,
        rounds=rounds,
        verify_tls=verify_tls,
    )
    rows = [
        _drawn_row(run, rng, name, rnd, rnd * len(ARMS) + i, (requests, distinct))
        for rnd in range(rounds)
        for i, name in enumerate(ARMS)
    ]
    ArmResult.objects.bulk_create(rows)
    return run


def _drawn_row(
    run: Run, rng: random.Random, name: str, rnd: int, position: int, per: tuple[int, int]
) -> ArmResult:
    """Arm ``name`` of round ``rnd``: ``per`` is (requests, distinct draws per histogram)."""
    median, connect, handshake = ARMS[name]
    requests, distinct = per
    users = run.config["users"]
    url = run.config["arms"][list(ARMS).index(name)]["url"]
    return arm_row(
        run,
        name,
        position,
        requests=requests,
        round=rnd,
        requested_url=url,
        ttfb_hist=drawn(rng, int(median * 0.9), distinct, requests),
        ttlb_hist=drawn(rng, median, distinct, requests),
        connect_hist=drawn(rng, connect, distinct, requests) if connect else "",
        tls_handshake_hist=drawn(rng, handshake, distinct, requests) if handshake else "",
        sizes_by_url={"/1k": [1024]},
        connections_opened=requests if connect else users,
        tls_sessions_reused=requests if name == "tls_resumed" else 0,
        series=drawn_series(rng, median, run.config["duration_s"], requests, users),
    )
