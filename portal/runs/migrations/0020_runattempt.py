"""Attempts as rows (RunAttempt), filled from the runs' attempt state; the old Run columns go in 0021.

Two migrations, not one: on PostgreSQL the rows inserted here leave deferred foreign-key checks
pending, and the run table cannot be altered in the same transaction.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.utils.dateparse import parse_datetime


def _moment(text):
    return parse_datetime(text) if text else None


def copy_attempts(apps, schema_editor):
    """One RunAttempt per entry of ``Run.attempts``; the current attempt of a running run gets the
    run's heartbeat, deadline, arm in progress and hand-back flag (it is the open one); a requeued
    run's last attempt ends when it was put back in the queue if its entry says nothing."""
    Run = apps.get_model("runs", "Run")
    RunAttempt = apps.get_model("runs", "RunAttempt")
    runs = Run.objects.exclude(attempt=0, attempts=[]).order_by("pk")
    rows = []
    for run in runs.iterator(chunk_size=500):
        entries = {entry.get("attempt"): entry for entry in run.attempts or [] if entry.get("attempt")}
        if run.attempt and run.attempt not in entries:
            entries[run.attempt] = {"attempt": run.attempt, "worker": run.worker, "host": run.generator_host}
        if not entries and run.status == "running":  # claimed before attempts were counted
            entries[1] = {"attempt": 1, "worker": run.worker, "host": run.generator_host}
        current = max(entries, default=0)
        for number, entry in sorted(entries.items()):
            is_open = number == current and run.status == "running"
            claimed = _moment(entry.get("started")) or run.started or run.created
            ended = None if is_open else _moment(entry.get("ended"))
            if not is_open and ended is None:
                ended = (run.requeued if run.status == "queued" else run.finished) or run.heartbeat or claimed
            outcome = entry.get("outcome") or "running"
            if not is_open and outcome == "running":
                outcome = run.status if run.status in ("succeeded", "failed", "cancelled") else "lost"
            rows.append(
                RunAttempt(
                    run_id=run.pk,
                    number=number,
                    worker=(entry.get("worker") or run.worker or "")[:255],
                    host=(entry.get("host") or run.generator_host or "")[:255],
                    claimed=claimed,
                    heartbeat=(run.heartbeat if number == current and run.heartbeat else None)
                    or ended
                    or claimed,
                    deadline=run.deadline if number == current else None,
                    current_arm=run.current_arm if number == current else "",
                    handback=run.handback if is_open else False,
                    ended=ended,
                    outcome=outcome[:16],
                    reason=entry.get("reason") or "",
                    arms=entry.get("arms") or [],
                    partial=entry.get("partial") or [],
                )
            )
        if len(rows) >= 500:
            RunAttempt.objects.bulk_create(rows)
            rows = []
    RunAttempt.objects.bulk_create(rows)


def copy_back(apps, schema_editor):
    """Back to the run's columns: its attempts as the ``attempts`` list, the last one's state."""
    Run = apps.get_model("runs", "Run")
    RunAttempt = apps.get_model("runs", "RunAttempt")
    by_run = {}
    for attempt in RunAttempt.objects.order_by("run_id", "number").iterator(chunk_size=500):
        by_run.setdefault(attempt.run_id, []).append(attempt)
    for run_id, attempts in by_run.items():
        last = attempts[-1]
        entries = []
        for a in attempts:
            entry = {"attempt": a.number, "worker": a.worker, "host": a.host, "started": a.claimed.isoformat(),
                     "outcome": a.outcome, "arms": a.arms}  # fmt: skip
            if a.ended:
                entry.update(ended=a.ended.isoformat(), reason=a.reason)
            if a.partial:
                entry["partial"] = a.partial
            entries.append(entry)
        Run.objects.filter(pk=run_id).update(
            attempt=last.number,
            attempts=entries,
            worker=last.worker,
            generator_host=last.host,
            heartbeat=last.heartbeat,
            deadline=last.deadline,
            current_arm=last.current_arm,
            handback=last.handback,
        )
        Run.objects.filter(pk=run_id, status="queued").update(requeued=last.ended)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0019_run_scenario_moved"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunAttempt",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("number", models.PositiveSmallIntegerField()),
                ("worker", models.CharField(max_length=255)),
                ("host", models.CharField(max_length=255)),
                ("claimed", models.DateTimeField()),
                ("heartbeat", models.DateTimeField()),
                ("deadline", models.DateTimeField(blank=True, null=True)),
                ("current_arm", models.CharField(blank=True, max_length=80)),
                ("handback", models.BooleanField(default=False)),
                ("ended", models.DateTimeField(blank=True, null=True)),
                ("outcome", models.CharField(default="running", max_length=16)),
                ("reason", models.TextField(blank=True)),
                ("arms", models.JSONField(blank=True, default=list)),
                ("partial", models.JSONField(blank=True, default=list)),
                (
                    "run",
                    # Named "attempts" in 0020, once the run's own "attempts" column is gone.
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="runs.run"
                    ),
                ),
            ],
            options={
                "ordering": ["run", "number"],
                "indexes": [
                    models.Index(
                        condition=models.Q(("ended__isnull", True)),
                        fields=["host"],
                        name="runattempt_open_host_idx",
                    ),
                    models.Index(
                        condition=models.Q(("ended__isnull", True)),
                        fields=["heartbeat"],
                        name="runattempt_open_heartbeat_idx",
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("run", "number"), name="runattempt_run_number_uniq"),
                ],
            },
        ),
        migrations.RunPython(copy_attempts, copy_back),
    ]
