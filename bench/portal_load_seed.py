"""The data of the portal load bench (``bench/portal_load``), made in its own database.

Imported by the bench after it has pointed ``DATABASE_URL`` at its private database and called
``django.setup()``. It makes what a real project holds after a few runs, through the product's own
code where the product has it:

* three accounts (``owner``, ``member``, ``viewer`` roles) in one project;
* a target (loopback URLs of the nginx the bench starts) and five finished runs of the same shape:
  5 arms × 4 interleaved rounds × 500 000 requests, 120 measured seconds per arm and round with
  its per-second series; latencies drawn from a log-normal with a tail and recorded into HDR
  histograms exactly as the engine records and encodes them (``workers.engine.recorder``). Each
  run then ends as the worker ends it: its report computed and stored with its summary
  (``store_summary``) and its page's report section (``store_after_end``), then frozen and signed
  (``freeze_after_end``);
* a share link of run 1 (the share-link view) and one of run 2 (its status JSON, which CI polls);
* a saved scenario of the loopback target with a webhook trigger (rate 60 runs a minute) and a
  project quota high enough for every run the webhook starts during the bench.
"""

from __future__ import annotations

import random

from django.contrib.auth import get_user_model
from django.utils import timezone

from portal.hooks import services as hooks
from portal.projects.models import Membership, Project, ProjectQuota, Role
from portal.runs import fragments, reporting, starting
from portal.runs.models import ArmResult, Run
from portal.sharing import services as sharing
from portal.signing.services import freeze_after_end
from portal.targets.models import Target
from workers.engine.recorder import HIST_MAX_US, HIST_MIN_US, new_histogram

PASSWORD = "portal-load-bench-1"  # noqa: S105 - throwaway accounts in a throwaway database
ACCOUNTS = {"owner": Role.OWNER, "member": Role.MEMBER, "viewer": Role.VIEWER}
ARMS = {  # name: (median TTLB µs, connect µs or None, handshake µs or None)
    "plain": (450, None, None),
    "tls": (520, None, None),
    "plain_new": (700, 90, None),
    "tls_new": (2300, 95, 1400),
    "tls_resumed": (1500, 95, 700),
}
RUNS = 5
ROUNDS = 4
REQUESTS_PER_ARM_ROUND = 500_000
SECONDS_PER_ARM_ROUND = 120
DISTINCT_SAMPLES = 5_000  # each recorded with a count of 100: 500 000 requests
USERS = 16
# The webhook's scenario: tiny and loopback-only (it never runs during the bench: no worker).
WEBHOOK_SCENARIO = {"arms": ["plain", "tls"], "users": 1, "warmup_s": 1, "duration_s": 1, "verify_tls": False}


def histogram(rng: random.Random, median_us: int) -> str:
    """An encoded HDR histogram of 500 000 latencies around ``median_us`` (with a tail), recorded
    into the engine's own histogram shape (1 µs … 60 s, 3 digits) and encoded as the engine does."""
    hist = new_histogram()
    count = REQUESTS_PER_ARM_ROUND // DISTINCT_SAMPLES
    for _ in range(DISTINCT_SAMPLES):
        value = int(median_us * rng.lognormvariate(0.0, 0.35))
        if rng.random() < 0.002:  # a tail, as real runs have
            value *= 20
        hist.record_value(min(max(value, HIST_MIN_US), HIST_MAX_US), count)
    return hist.encode().decode("ascii")


def series(rng: random.Random, median_us: int) -> list[dict]:
    per_s = REQUESTS_PER_ARM_ROUND // SECONDS_PER_ARM_ROUND
    return [
        {
            "t_s": t + 1,
            "requests": per_s + rng.randint(-40, 40),
            "failures": 0,
            "p50_us": int(median_us * rng.uniform(0.97, 1.03)),
            "p95_us": int(median_us * rng.uniform(1.7, 1.9)),
            "p99_us": int(median_us * rng.uniform(2.4, 2.9)),
            "users": USERS,
            "gen_cpu_pct": round(rng.uniform(30, 45), 1),
            "gen_runq_pct": round(rng.uniform(0, 3), 1),
            "loop_lag_ms": round(rng.uniform(0.1, 0.8), 2),
        }
        for t in range(SECONDS_PER_ARM_ROUND)
    ]


def _arm_row(run: Run, rng: random.Random, name: str, rnd: int, position: int, url: str) -> ArmResult:
    median, connect, handshake = ARMS[name]
    return ArmResult(
        run=run,
        arm=name,
        round=rnd,
        position=position,
        url=url,
        requested_url=url,
        users=USERS,
        warmup_s=10,
        duration_s=SECONDS_PER_ARM_ROUND,
        requests=REQUESTS_PER_ARM_ROUND,
        failures=0,
        rps=REQUESTS_PER_ARM_ROUND / SECONDS_PER_ARM_ROUND,
        ttfb_hist=histogram(rng, int(median * 0.9)),
        ttlb_hist=histogram(rng, median),
        connect_hist=histogram(rng, connect) if connect else "",
        tls_handshake_hist=histogram(rng, handshake) if handshake else "",
        status_codes={"200": REQUESTS_PER_ARM_ROUND},
        response_bytes_min=1024,
        response_bytes_max=1024,
        sizes_by_url={"/1k": [1024]},
        connections_opened=REQUESTS_PER_ARM_ROUND if connect else USERS,
        tls_sessions_reused=REQUESTS_PER_ARM_ROUND if name == "tls_resumed" else 0,
        series=series(rng, median),
        started=run.started,
        finished=run.finished,
    )


def finished_run(owner, target: Target, seed: int) -> Run:
    """A succeeded run of ``ARMS`` × ``ROUNDS``, ended as the worker ends one (report stored,
    summary written, report frozen and signed)."""
    rng = random.Random(seed)  # noqa: S311 - synthetic latencies, not secrets
    urls = {name: target.tls_url if name.startswith("tls") else target.plain_url for name in ARMS}
    config = {
        "arms": [{"name": name, "url": urls[name]} for name in ARMS],
        "users": USERS,
        "spawn_rate": USERS,
        "warmup_s": 10,
        "duration_s": SECONDS_PER_ARM_ROUND,
        "rounds": ROUNDS,
        "verify_tls": False,
    }
    now = timezone.now()
    run = Run.objects.create(
        project=target.project,
        owner=owner,
        target=target,
        config=config,
        status=Run.Status.SUCCEEDED,
        started=now,
        finished=now,
    )
    rows = [
        _arm_row(run, rng, name, rnd, rnd * len(ARMS) + i, urls[name])
        for rnd in range(ROUNDS)
        for i, name in enumerate(ARMS)
    ]
    ArmResult.objects.bulk_create(rows)
    reporting.store_summary(run)
    fragments.store_after_end(run)
    freeze_after_end(run)
    run.refresh_from_db()
    return run


def seed(plain_url: str, tls_url: str) -> dict:
    """Make everything; return what the load users need (accounts, run codes, tokens, the webhook)."""
    users = get_user_model()
    accounts = {name: users.objects.create_user(f"load-{name}", password=PASSWORD) for name in ACCOUNTS}
    project = Project.objects.create(name="portal-load")
    for name, role in ACCOUNTS.items():
        Membership.objects.create(project=project, user=accounts[name], role=role)
    owner = accounts["owner"]
    # Every run the webhook starts stays queued (no worker): room for all of them.
    ProjectQuota.objects.create(project=project, max_concurrent_runs=100_000, max_runs_per_day=100_000)
    target = Target.objects.create(project=project, name="load-target", plain_url=plain_url, tls_url=tls_url)
    runs = [finished_run(owner, target, seed=100 + i) for i in range(RUNS)]
    _, page_token = sharing.create_share(owner, run=runs[0], note="load bench: page")
    _, status_token = sharing.create_share(owner, run=runs[1], note="load bench: CI status")
    scenario = starting.save_scenario(
        project, "load-webhook", {"plain_url": plain_url, "tls_url": tls_url, **WEBHOOK_SCENARIO}
    )
    trigger, secret = hooks.create_trigger(scenario, owner)
    trigger.rate_per_minute = 60
    trigger.save(update_fields=["rate_per_minute"])
    return {
        "password": PASSWORD,
        "accounts": [user.username for user in accounts.values()],
        "project": str(project.code),
        "target_name": target.name,
        "runs": [str(run.code) for run in runs],
        "report_sha256": runs[0].frozen_report.sha256,
        "page_token": page_token,
        "status_token": status_token,
        "webhook_path": f"/hooks/{trigger.public_id}",
        "webhook_secret": secret,
        "arm_rows": ArmResult.objects.filter(run__in=runs).count(),
        "requests_per_run": runs[0].summary["requests"],
    }
