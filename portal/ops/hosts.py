"""Generator hosts as operators see them: a host runs a worker that consumes the ``runs`` queue or a
``gen.<host>`` queue (docs/scaling.md). Its heartbeat is its workers' ``WorkerSeen`` rows (every
10 s, workers/presence.py); its runs in progress are the open attempts on it (``RunAttempt.host``);
its measured capacity comes from its recent arms and, when recorded, ``bench/generator``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from portal.lib.stats import hostcapacity
from portal.ops.models import GeneratorBench
from portal.runs.models import ArmResult, GeneratorHost, Run, RunAttempt, WorkerSeen

RUNS_QUEUE = "runs"
GEN_PREFIX = "gen."
# The measured capacity comes from this many of the latest complete arms of succeeded runs.
RECENT_ARMS = 200


def generates(queues: list[str]) -> bool:
    return any(q == RUNS_QUEUE or q.startswith(GEN_PREFIX) for q in queues)


def _fresh_since(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(seconds=settings.TOLLGATE_WORKER_SEEN_S)


def alive_hosts(now: datetime | None = None) -> set[str]:
    fresh = WorkerSeen.objects.filter(last_seen__gte=_fresh_since(now), stopping=False)
    return {w.host for w in fresh if generates(w.queues)}


def alive_workers_by_queue(now: datetime | None = None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for worker in WorkerSeen.objects.filter(last_seen__gte=_fresh_since(now), stopping=False):
        for queue in worker.queues:
            counts[queue] = counts.get(queue, 0) + 1
    return counts


@dataclass
class HostRow:
    host: str
    workers: list[WorkerSeen] = field(default_factory=list)
    last_claim: datetime | None = None
    attempts: list[RunAttempt] = field(default_factory=list)
    capacity: dict = field(default_factory=dict)  # kind → {"per_cpu_s", "arms"}
    bench: GeneratorBench | None = None
    state: str = "silent"

    @property
    def last_seen(self) -> datetime | None:
        return max((w.last_seen for w in self.workers), default=None)


def measured_capacity() -> dict[str, dict[str, dict]]:
    """host → kind → median requests per generator CPU-second over its recent arms."""
    host = RunAttempt.objects.filter(run=OuterRef("run"), number=OuterRef("attempt")).values("host")[:1]
    arms = (
        ArmResult.objects.filter(run__status=Run.Status.SUCCEEDED, complete=True)
        .annotate(host=Subquery(host))
        .order_by("-finished")
        .values_list("arm", "rps", "series", "generators", "host")[:RECENT_ARMS]
    )
    rates = []
    for arm, rps, series, generators, on_host in arms:
        rates += hostcapacity.arm_rates(arm, rps or 0.0, series or [], generators or [], on_host or "")
    return hostcapacity.summarize(rates)


def host_rows(now: datetime | None = None) -> list[HostRow]:
    """Every generator host known (from workers, claims or open attempts), alive ones first."""
    rows: dict[str, HostRow] = {}
    for worker in WorkerSeen.objects.order_by("name"):
        if generates(worker.queues):
            rows.setdefault(worker.host, HostRow(worker.host)).workers.append(worker)
    for gen in GeneratorHost.objects.all():
        rows.setdefault(gen.host, HostRow(gen.host)).last_claim = gen.last_claim
    open_attempts = RunAttempt.objects.filter(ended__isnull=True).select_related(
        "run__target", "run__project"
    )
    for attempt in open_attempts.order_by("claimed"):
        rows.setdefault(attempt.host, HostRow(attempt.host)).attempts.append(attempt)
    benches = {b.host: b for b in GeneratorBench.objects.all()}
    for name in benches:
        rows.setdefault(name, HostRow(name))
    capacity = measured_capacity()
    fresh = _fresh_since(now)
    for row in rows.values():
        row.capacity = capacity.get(row.host, {})
        row.bench = benches.get(row.host)
        current = [w for w in row.workers if w.last_seen >= fresh]
        if any(not w.stopping for w in current):
            row.state = "alive"
        elif current:
            row.state = "stopping"
    order = {"alive": 0, "stopping": 1, "silent": 2}
    return sorted(rows.values(), key=lambda r: (order[r.state], r.host))
