"""A saved scenario's schedule and the log of its firings.

The schedule itself lives in django-celery-beat's tables (a ``PeriodicTask`` on a ``CrontabSchedule``
with the schedule's time zone), which the beat's ``DatabaseScheduler`` reads; ``Schedule`` is the
scenario's side of it: the expression as typed, who the runs belong to, and the task it made.
"""

from __future__ import annotations

from uuid import uuid4

from django.conf import settings
from django.db import models


class Schedule(models.Model):
    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    scenario = models.OneToOneField("scenarios.Scenario", models.CASCADE, related_name="schedule")
    # Five cron fields (minute hour day-of-month month day-of-week), read in ``time_zone``.
    cron = models.CharField(max_length=120)
    time_zone = models.CharField(max_length=63, default="UTC")
    enabled = models.BooleanField(default=True)
    # Owner of the runs it starts; must still be a member (or owner) of the project when it fires.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="schedules")
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask", models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"schedule of {self.scenario}: {self.cron} {self.time_zone}"


class Firing(models.Model):
    """One tick of the beat for a schedule: the run it started, or why it started none."""

    class Outcome(models.TextChoices):
        STARTED = "started"
        SKIPPED = "skipped"  # the previous run of the scenario had not ended
        REFUSED = "refused"  # a quota, the creator's role, or the scenario's options refused it

    schedule = models.ForeignKey(Schedule, models.CASCADE, related_name="firings")
    # The Celery task id of the tick: a redelivered message finds its firing decided.
    task_id = models.CharField(max_length=64, unique=True)
    at = models.DateTimeField()
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    reason = models.TextField(blank=True)
    run = models.ForeignKey("runs.Run", models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # The scenario page's log: a schedule's newest firings.
            models.Index(fields=["schedule", "-at"], name="firing_schedule_at_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} {self.at:%Y-%m-%d %H:%M} {self.outcome}"
