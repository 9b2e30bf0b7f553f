"""/metrics: Tollgate's state as Prometheus reads it, computed from the database at each scrape.

The figures live in PostgreSQL, not in one process's memory: every web process answers the same,
whichever of them the scrape reaches, and a restart loses nothing. Durations are histograms over
every stored run (and arm) that has them; deliveries are the stored rows (refused webhook deliveries
are pruned after ``TOLLGATE_LOG_RETENTION_DAYS``, so those are gauges, not counters).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Min, Q, Sum
from django.utils import timezone
from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import generate_latest

from portal.hooks.models import CallbackDelivery, WebhookDelivery
from portal.ops import hosts
from portal.runs.models import ArmResult, Run, RunAttempt

QUEUE_WAIT_BUCKETS_S = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600)
RUN_BUCKETS_S = (10, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 6 * 3600)
ARM_BUCKETS_S = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def _histogram(queryset, start: str, end: str, buckets: tuple) -> tuple[list, float]:
    """Cumulative ``[(le, count)]`` with +Inf, and the sum in seconds, of ``end - start`` (one query)."""
    span = ExpressionWrapper(F(end) - F(start), output_field=DurationField())
    rows = queryset.filter(**{f"{start}__isnull": False, f"{end}__isnull": False}).annotate(span=span)
    counts = {f"le{i}": Count("pk", filter=Q(span__lte=timedelta(seconds=b))) for i, b in enumerate(buckets)}
    got = rows.aggregate(total=Count("pk"), sum=Sum("span"), **counts)
    pairs = [(str(float(b)), got[f"le{i}"]) for i, b in enumerate(buckets)] + [("+Inf", got["total"])]
    return pairs, got["sum"].total_seconds() if got["sum"] else 0.0


def _runs() -> list:
    by_status = dict(Run.objects.values_list("status").annotate(n=Count("pk")).order_by())
    runs = GaugeMetricFamily("tollgate_runs", "Stored runs by status.", labels=["status"])
    for status in Run.Status.values:
        runs.add_metric([status], by_status.get(status, 0))
    depth = GaugeMetricFamily("tollgate_run_queue_depth", "Runs waiting in the queue (status queued).")
    depth.add_metric([], by_status.get(Run.Status.QUEUED, 0))
    oldest = Run.objects.filter(status=Run.Status.QUEUED).aggregate(at=Min("created"))["at"]
    age = GaugeMetricFamily(
        "tollgate_run_queue_oldest_wait_seconds", "How long the oldest queued run has waited (0: none)."
    )
    age.add_metric([], max(0.0, (timezone.now() - oldest).total_seconds()) if oldest else 0.0)
    running = GaugeMetricFamily(
        "tollgate_run_attempts_open",
        "Runs executing now (open attempts), by generator host.",
        labels=["host"],
    )
    open_by_host = RunAttempt.objects.filter(ended__isnull=True).values_list("host").annotate(n=Count("pk"))
    for host, n in open_by_host.order_by():
        running.add_metric([host], n)
    return [runs, depth, age, running]


def _durations() -> list:
    wait = HistogramMetricFamily(
        "tollgate_run_queue_wait_seconds", "From a run's creation to its first start, runs that started."
    )
    wait.add_metric([], *_histogram(Run.objects.all(), "created", "started", QUEUE_WAIT_BUCKETS_S))
    run = HistogramMetricFamily(
        "tollgate_run_duration_seconds", "From start to end of runs that ended, by status.", labels=["status"]
    )
    for status in Run.TERMINAL:
        run.add_metric(
            [status], *_histogram(Run.objects.filter(status=status), "started", "finished", RUN_BUCKETS_S)
        )
    arm = HistogramMetricFamily(
        "tollgate_arm_duration_seconds", "Wall time of each stored arm (warm-up and measured window)."
    )
    arm.add_metric([], *_histogram(ArmResult.objects.all(), "started", "finished", ARM_BUCKETS_S))
    return [wait, run, arm]


def webhook_outcome(code: int) -> str:
    return {202: "started", 200: "repeat"}.get(code, "refused")


def _deliveries() -> list:
    hooks = GaugeMetricFamily(
        "tollgate_webhook_deliveries",
        "Stored webhook deliveries by outcome (started, repeat, refused) and HTTP status code.",
        labels=["outcome", "code"],
    )
    for code, n in WebhookDelivery.objects.values_list("status_code").annotate(n=Count("pk")).order_by():
        hooks.add_metric([webhook_outcome(code), str(code)], n)
    callbacks = GaugeMetricFamily(
        "tollgate_callback_deliveries",
        "Callback attempts by outcome (pending, delivered, failed).",
        labels=["outcome"],
    )
    by_status = dict(CallbackDelivery.objects.values_list("status").annotate(n=Count("pk")).order_by())
    for status in CallbackDelivery.Status.values:
        callbacks.add_metric([status], by_status.get(status, 0))
    return [hooks, callbacks]


def _hosts() -> list:
    alive = hosts.alive_hosts()
    gauge = GaugeMetricFamily(
        "tollgate_generator_hosts_alive",
        "Generator hosts with a worker (runs or gen.* queue) seen in the last "
        f"{settings.TOLLGATE_WORKER_SEEN_S} s and not stopping.",
    )
    gauge.add_metric([], len(alive))
    workers = GaugeMetricFamily(
        "tollgate_workers_alive", "Workers seen lately and not stopping, by queue consumed.", labels=["queue"]
    )
    for queue, n in sorted(hosts.alive_workers_by_queue().items()):
        workers.add_metric([queue], n)
    return [gauge, workers]


class TollgateCollector:
    def collect(self):
        yield from _runs()
        yield from _durations()
        yield from _deliveries()
        yield from _hosts()


def exposition() -> bytes:
    """The text format, from a registry of its own (no process or platform collectors: the numbers
    of whichever web process answered would mean nothing to the operator)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TollgateCollector())
    return generate_latest(registry)
