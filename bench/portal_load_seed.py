"""The data of the portal load bench (``bench/portal_load``), made in its own database.

Imported by the bench after it has pointed ``DATABASE_URL`` at its private database and called
``django.setup()``. It makes what a real project holds after a few runs, through the product's own
code where the product has it:

* three accounts (``owner``, ``member``, ``viewer`` roles) in one project;
* a target (loopback URLs of the nginx the bench starts) and five finished runs of the same shape:
  5 arms × 4 interleaved rounds × 500 000 requests, 120 measured seconds per arm and round with
  its per-second series; latencies drawn from a log-normal with a tail and recorded into HDR
  histograms of the engine's shape (``bench/samples.py``, which the tests' runs use too). Each
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

from bench import samples
from portal.hooks import services as hooks
from portal.projects.models import Membership, Project, ProjectQuota, Role
from portal.runs import pages, reporting, starting
from portal.runs.models import ArmResult, Run
from portal.sharing import services as sharing
from portal.signing.services import freeze_after_end
from portal.targets.models import Target

PASSWORD = "portal-load-bench-1"  # noqa: S105 - throwaway accounts in a throwaway database
ACCOUNTS = {"owner": Role.OWNER, "member": Role.MEMBER, "viewer": Role.VIEWER}
ARMS = samples.ARMS  # name: (median TTLB µs, connect µs or None, handshake µs or None)
RUNS = 5
ROUNDS = 4
REQUESTS_PER_ARM_ROUND = 500_000
SECONDS_PER_ARM_ROUND = 120
DISTINCT_SAMPLES = 5_000  # each recorded with a count of 100: 500 000 requests
USERS = 16
# The webhook's scenario: tiny and loopback-only (it never runs during the bench: no worker).
WEBHOOK_SCENARIO = {"arms": ["plain", "tls"], "users": 1, "warmup_s": 1, "duration_s": 1, "verify_tls": False}


def finished_run(owner, target: Target, seed: int) -> Run:
    """A succeeded run of ``ARMS`` × ``ROUNDS``, ended as the worker ends one (report stored,
    summary written, report frozen and signed)."""
    rng = random.Random(seed)  # noqa: S311 - synthetic latencies, not secrets
    run = samples.drawn_run(
        owner,
        target,
        rng,
        rounds=ROUNDS,
        seconds=SECONDS_PER_ARM_ROUND,
        requests=REQUESTS_PER_ARM_ROUND,
        distinct=DISTINCT_SAMPLES,
        users=USERS,
        verify_tls=False,
    )
    reporting.store_summary(run)
    pages.store_after_end(run)
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
