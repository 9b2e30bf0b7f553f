"""The Schedule section of the scenario page: ``{% schedule_section scenario can_write %}`` — the
cron, its time zone, the next run (UTC and the schedule's zone) and the last firings. A tag, so the
scenario app renders it without importing this one."""

from __future__ import annotations

import zoneinfo

from django import template

from portal.schedules import services
from portal.schedules.models import Schedule

register = template.Library()
FIRINGS_SHOWN = 5


@register.inclusion_tag("schedules/_section.html")
def schedule_section(scenario, can_write: bool) -> dict:
    schedule = Schedule.objects.filter(scenario=scenario).first()
    upcoming = services.next_run_at(schedule)
    return {
        "scenario": scenario,
        "schedule": schedule,
        "can_write": can_write,
        "next_run_at": upcoming,
        # Formatted here: the template's date filter would turn it back into the site's zone (UTC).
        "next_run_local": f"{upcoming.astimezone(zoneinfo.ZoneInfo(schedule.time_zone)):%Y-%m-%d %H:%M}"
        if upcoming
        else "",
        "firings": list(schedule.firings.select_related("run")[:FIRINGS_SHOWN]) if schedule else [],
    }
