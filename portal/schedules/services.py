"""Making, changing and reading a scenario's schedule: one function each, shared by the portal, the
CLI (``tollgate scenario schedule``) and the API.

A schedule is a django-celery-beat ``PeriodicTask`` that sends ``workers.tasks.fire_schedule`` with
the schedule's id, on a ``CrontabSchedule`` in the schedule's time zone; the beat runs it with
``DatabaseScheduler``, which notices edits made here without a restart. Firing is
``portal.schedules.firing``.
"""

from __future__ import annotations

import json
import zoneinfo
from datetime import UTC, datetime

from celery.schedules import crontab
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask
from django_celery_beat.tzcrontab import TzAwareCrontab

from portal.lib.watching import schedules as cronspec
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.schedules.models import Schedule

TASK = "workers.tasks.fire_schedule"
# The maintenance worker fires schedules: run workers are busy for a whole run.
QUEUE = "maintenance"


class ScheduleError(ValueError):
    """The schedule asked for is not one; the message says why."""


class ScheduleRefused(PermissionError):
    """Whoever the schedule's runs would belong to may not start runs in the scenario's project."""


def refusal(scenario, user) -> str | None:
    """Why ``user`` may not own ``scenario``'s schedule, or None when they may. The runs a schedule
    starts belong to the user who saved it, so that user must be able to start runs in the
    scenario's project: an active member or owner (a superuser is no exception, a firing checks
    the membership). The one check of the page, the API, ``tollgate scenario schedule`` (all through
    ``set_schedule``) and every firing (``portal.schedules.firing``)."""
    role = role_in(user, scenario.project_id)
    if user.is_active and can(role, Role.MEMBER):
        return None
    standing = "the account is inactive" if not user.is_active else (role or "not a member")
    return (
        f"{user.get_username()} may not start runs in {scenario.project.name} ({standing}): a "
        "schedule's runs belong to whoever saves it, a member or owner of the scenario's project"
    )


def clean(when: str, time_zone: str) -> tuple[dict[str, str], str]:
    """The five cron fields of ``when`` (cron or 'daily at HH:MM') and the checked zone; each field's
    values judged by Celery's crontab parser, the one the beat fires by. Raises ``ScheduleError``."""
    try:
        fields = cronspec.parse(when)
        zone = cronspec.check_zone(time_zone)
    except cronspec.CronError as exc:
        raise ScheduleError(str(exc)) from None
    for name, value in fields.items():
        try:
            crontab(**{name: value})
        except (ValueError, IndexError) as exc:
            raise ScheduleError(f"The {name.replace('_', ' ')} field {value!r}: {exc}") from None
    return fields, zone


def task_name(scenario) -> str:
    return f"scenario {scenario.code}"


def set_schedule(scenario, user, when: str, time_zone: str | None = None, enabled: bool = True) -> Schedule:
    """Schedule ``scenario`` (runs belong to ``user``) at ``when`` in ``time_zone`` (None: the
    schedule's current zone, else UTC); an existing schedule is changed. Raises ``ScheduleRefused``
    (before anything is saved) when ``user`` may not start runs in the scenario's project, and
    ``ScheduleError`` for a schedule that is not one."""
    why = refusal(scenario, user)
    if why:
        raise ScheduleRefused(why)
    current = Schedule.objects.filter(scenario=scenario).first()
    zone = time_zone or (current.time_zone if current else "UTC")
    fields, zone = clean(when, zone)
    with transaction.atomic():
        cron, _ = CrontabSchedule.objects.get_or_create(**fields, timezone=zone)
        schedule = Schedule.objects.select_for_update().filter(scenario=scenario).first()
        if schedule is None:
            schedule = Schedule(scenario=scenario)
        schedule.cron, schedule.time_zone, schedule.enabled = cronspec.expression(fields), zone, enabled
        schedule.created_by = user
        schedule.save()
        task = schedule.periodic_task or PeriodicTask(name=task_name(scenario), task=TASK)
        task.crontab, task.interval, task.enabled = cron, None, enabled
        task.kwargs = json.dumps({"schedule_id": schedule.pk})
        task.queue = QUEUE
        task.save()  # its signal tells a running beat (PeriodicTasks.last_update) to reload
        if schedule.periodic_task_id != task.pk:
            schedule.periodic_task = task
            schedule.save(update_fields=["periodic_task"])
    return schedule


def clear_schedule(scenario) -> bool:
    """Remove ``scenario``'s schedule and its beat task (False: it had none). Its firings go too."""
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(scenario=scenario).first()
        if schedule is None:
            return False
        schedule.delete()  # its beat task goes with it (receivers.py): the beat reloads
    return True


def next_run_at(schedule: Schedule | None, now: datetime | None = None) -> datetime | None:
    """When the beat fires ``schedule`` next (aware, UTC), by the crontab the beat itself evaluates;
    None when there is no schedule or it is disabled."""
    if schedule is None or not schedule.enabled:
        return None
    now = now or timezone.now()
    fields = cronspec.parse(schedule.cron)
    zone = zoneinfo.ZoneInfo(schedule.time_zone)
    entry = TzAwareCrontab(**fields, tz=zone)
    # The crontab's own step from ``now`` to its next match, in the zone's wall time (so 02:00 stays
    # 02:00 across daylight saving); whole minutes, as the beat fires.
    start, step, _ = entry.remaining_delta(now.astimezone(zone).replace(second=0, microsecond=0))
    return (start + step).astimezone(UTC)


def describe(schedule: Schedule | None, scenario) -> dict:
    """The JSON of a schedule (CLI and API): ``{"scenario", "cron", "time_zone", "enabled",
    "next_run_at"}``; cron null when the scenario has none."""
    upcoming = next_run_at(schedule)
    return {
        "scenario": str(scenario.code),
        "cron": schedule.cron if schedule else None,
        "time_zone": schedule.time_zone if schedule else None,
        "enabled": schedule.enabled if schedule else False,
        "next_run_at": upcoming.isoformat().replace("+00:00", "Z") if upcoming else None,
    }
