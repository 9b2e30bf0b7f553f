"""Tollgate's own settings (imported at the end of portal/settings.py): quotas, the outbound address
policy, share links, webhooks, log retention and, for scale-out, generators. Environment-driven
like the rest; see README, Production."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from portal.lib.runs import protocol
from portal.lib.security import netpolicy
from portal.settings_env import envbool, envint, envlist

# Quotas: the operator's defaults of what one project may ask for (portal/lib/runs/quotas.py); a project's
# ProjectQuota (Django admin) overrides any of them.
TOLLGATE_MAX_USERS = envint("TOLLGATE_MAX_USERS", "500")
TOLLGATE_MAX_DURATION_S = envint("TOLLGATE_MAX_DURATION_S", "3600")
TOLLGATE_MAX_WARMUP_S = envint("TOLLGATE_MAX_WARMUP_S", "600")
TOLLGATE_MAX_ROUNDS = envint("TOLLGATE_MAX_ROUNDS", "20")
TOLLGATE_MAX_ARRIVAL_RATE = envint("TOLLGATE_MAX_ARRIVAL_RATE", "100000")
# Locust worker processes per generator host a run may ask for (``generators``; docs/scaling.md).
TOLLGATE_MAX_GENERATORS = envint("TOLLGATE_MAX_GENERATORS", str(protocol.OPERATOR_MAX_GENERATORS))
# Outbound address policy (portal/lib/security/netpolicy.py): internal ranges the operator lets runs,
# redirects and SSH probes reach, CIDRs, comma-separated; empty: public addresses only. The demo, the
# tests and CI set 127.0.0.0/8,::1/128.
try:
    TOLLGATE_ALLOW_NETWORKS = [str(net) for net in netpolicy.parse_networks(envlist(netpolicy.ALLOW_ENV, ""))]
except netpolicy.PolicyError as exc:
    raise ImproperlyConfigured(f"{netpolicy.ALLOW_ENV}: {exc}") from None
# Ownership verification (portal/targets/verification.py): allow-listed ranges that are reachable but
# still need the target verified (shared internal networks), and how long a verification counts.
try:
    _verify = envlist("TOLLGATE_VERIFY_NETWORKS", "")
    TOLLGATE_VERIFY_NETWORKS = [str(net) for net in netpolicy.parse_networks(_verify)]
except netpolicy.PolicyError as exc:
    raise ImproperlyConfigured(f"TOLLGATE_VERIFY_NETWORKS: {exc}") from None
TOLLGATE_VERIFICATION_MAX_AGE_DAYS = envint("TOLLGATE_VERIFICATION_MAX_AGE_DAYS", "30")
# The local process probe samples the worker's own machine: an operator's choice (on in the demo).
TOLLGATE_LOCAL_PROBE = envbool("TOLLGATE_LOCAL_PROBE", "false")
TOLLGATE_MAX_REQUESTS_PER_RUN = envint("TOLLGATE_MAX_REQUESTS_PER_RUN", "100000000")
TOLLGATE_MAX_CONCURRENT_RUNS_PER_PROJECT = envint("TOLLGATE_MAX_CONCURRENT_RUNS_PER_PROJECT", "4")
TOLLGATE_MAX_RUNS_PER_DAY_PER_PROJECT = envint("TOLLGATE_MAX_RUNS_PER_DAY_PER_PROJECT", "200")
# Runs one generator host runs at once; more wait, visibly, for a generator.
TOLLGATE_MAX_RUNS_PER_GENERATOR = envint("TOLLGATE_MAX_RUNS_PER_GENERATOR", "1")
# Pre-filled values of the run form (the demo points them at its own target).
TOLLGATE_DEFAULT_PLAIN_URL = os.environ.get("TOLLGATE_DEFAULT_PLAIN_URL", "")
TOLLGATE_DEFAULT_TLS_URL = os.environ.get("TOLLGATE_DEFAULT_TLS_URL", "")
TOLLGATE_DEFAULT_VERIFY_TLS = envbool("TOLLGATE_DEFAULT_VERIFY_TLS", "true")
TOLLGATE_DEFAULT_LOCAL_PROCESS = os.environ.get("TOLLGATE_DEFAULT_LOCAL_PROCESS", "")
# Share links (portal.sharing): the longest expiry an owner may choose, in days (default 30 days).
TOLLGATE_SHARE_MAX_DAYS = envint("TOLLGATE_SHARE_MAX_DAYS", "365")
if TOLLGATE_SHARE_MAX_DAYS < 1:
    raise ImproperlyConfigured(f"TOLLGATE_SHARE_MAX_DAYS must be at least 1, got {TOLLGATE_SHARE_MAX_DAYS}")
# Public base URL for links printed by the CLI (report_url).
TOLLGATE_BASE_URL = os.environ.get("TOLLGATE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
# Webhooks (portal.hooks, docs/ci.md): how long a rotated-out secret keeps verifying; callbacks are
# tried this many times, waiting BACKOFF_S * 2^(attempt - 1) seconds between attempts.
TOLLGATE_WEBHOOK_GRACE_HOURS = envint("TOLLGATE_WEBHOOK_GRACE_HOURS", "24")
TOLLGATE_CALLBACK_ATTEMPTS = envint("TOLLGATE_CALLBACK_ATTEMPTS", "5")
TOLLGATE_CALLBACK_BACKOFF_S = envint("TOLLGATE_CALLBACK_BACKOFF_S", "2")
# Logs callers can grow (workers.retention, daily from beat): refused webhook deliveries and share
# views go after this many days; a trigger stores at most this many refused deliveries a minute.
# Project invitations (portal.projects): one not accepted within this many days can no longer be
# accepted; the owner sees it as expired and invites again (which starts the time afresh).
TOLLGATE_INVITATION_DAYS = envint("TOLLGATE_INVITATION_DAYS", "14")
if TOLLGATE_INVITATION_DAYS < 1:
    raise ImproperlyConfigured(f"TOLLGATE_INVITATION_DAYS must be at least 1, got {TOLLGATE_INVITATION_DAYS}")
TOLLGATE_LOG_RETENTION_DAYS = envint("TOLLGATE_LOG_RETENTION_DAYS", "90")
TOLLGATE_WEBHOOK_REFUSED_LOG_PER_MINUTE = envint("TOLLGATE_WEBHOOK_REFUSED_LOG_PER_MINUTE", "60")
# Distributed runs (docs/scaling.md). The address the run's Locust master binds: loopback unless other
# generator hosts join (then an address they reach, or 0.0.0.0); the address they are told (default:
# the bind address, or this host's name for 0.0.0.0); its port (0: a free one per run; fix it only for
# a firewall, and then one distributed run at a time per host); how long the master waits for its
# workers; the other generator hosts' queues to invite: "auto" (every live gen.* queue but this
# host's, asked over the broker), a comma-separated list of queue names, or empty (none).
TOLLGATE_MASTER_BIND = os.environ.get("TOLLGATE_MASTER_BIND", protocol.MASTER_BIND)
TOLLGATE_MASTER_ADVERTISE = os.environ.get("TOLLGATE_MASTER_ADVERTISE", "")
TOLLGATE_MASTER_PORT = envint("TOLLGATE_MASTER_PORT", "0")  # 0: a free port per run
TOLLGATE_GENERATOR_CONNECT_S = envint("TOLLGATE_GENERATOR_CONNECT_S", str(protocol.GENERATOR_CONNECT_S))
TOLLGATE_GENERATOR_HOSTS = os.environ.get("TOLLGATE_GENERATOR_HOSTS", "auto")
# This host's generator queue is gen.<TOLLGATE_GENERATOR_NAME> (default: the host name); a Celery worker
# consumes it when TOLLGATE_GENERATOR_QUEUE is true (workers/celery_app.py), to join other runs' masters.
TOLLGATE_GENERATOR_NAME = os.environ.get("TOLLGATE_GENERATOR_NAME", "")
TOLLGATE_GENERATOR_QUEUE = envbool("TOLLGATE_GENERATOR_QUEUE", "false")

# Reliability (docs/reliability.md, workers/attempts.py): a running run whose heartbeat (every 2 s)
# has been silent this long, or that passed its deadline, is resumed on the next free worker with
# its finished arms kept; the reaper looks every TOLLGATE_REAP_EVERY_S. A resumption nobody takes
# within TOLLGATE_RESUME_WAIT_S, or a run lost TOLLGATE_MAX_RUN_ATTEMPTS times, fails with the reason.
TOLLGATE_REAP_SILENCE_S = envint("TOLLGATE_REAP_SILENCE_S", "30")
TOLLGATE_REAP_EVERY_S = envint("TOLLGATE_REAP_EVERY_S", "15")
TOLLGATE_RESUME_WAIT_S = envint("TOLLGATE_RESUME_WAIT_S", "600")
TOLLGATE_MAX_RUN_ATTEMPTS = envint("TOLLGATE_MAX_RUN_ATTEMPTS", "3")
# A run waiting for a generator (TOLLGATE_MAX_RUNS_PER_GENERATOR) or a slot of its project is tried
# again with a backoff (10 s doubling to 60 s) for at most this long, then fails saying who held the slot.
TOLLGATE_GENERATOR_WAIT_S = envint("TOLLGATE_GENERATOR_WAIT_S", "1800")
# A worker is shown as present while it reported itself within this (workers/presence.py).
TOLLGATE_WORKER_SEEN_S = envint("TOLLGATE_WORKER_SEEN_S", "30")

# Operations (portal/ops, docs/operations.md). /metrics answers only clients in these networks (CIDRs,
# comma-separated; the client address as the audit log reads it, behind TOLLGATE_TRUSTED_PROXY_COUNT
# proxies); empty: /metrics answers 404 to everyone.
try:
    _metrics = envlist("TOLLGATE_METRICS_NETWORKS", "")
    TOLLGATE_METRICS_NETWORKS = [str(net) for net in netpolicy.parse_networks(_metrics)]
except netpolicy.PolicyError as exc:
    raise ImproperlyConfigured(f"TOLLGATE_METRICS_NETWORKS: {exc}") from None
# /readyz wants a worker consuming the runs queue that reported itself within this many seconds.
TOLLGATE_READY_WORKER_S = envint("TOLLGATE_READY_WORKER_S", "60")
