"""What a schedule's "when" may be: a five-field cron expression (minute hour day-of-month month
day-of-week, as crontab(5) and Celery read them) or the short form ``daily at HH:MM``.

Django-free and Celery-free: this turns the text a person typed into the five fields, with one error
message per mistake; ``portal.schedules.services`` then lets Celery's own crontab parser judge each
field's values, since that is the parser the beat fires by.
"""

from __future__ import annotations

import re
import zoneinfo

DAILY = re.compile(r"^\s*daily\s+at\s+(\d{1,2}):(\d{2})(?:\s+utc)?\s*$", re.I)
# Digits, names (mon, jan), ranges, steps, lists and the wildcard: what crontab(5) fields hold.
FIELD = re.compile(r"^[0-9A-Za-z*/,\-]{1,40}$")
FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
MAX_TEXT = 120


class CronError(ValueError):
    """The text is no schedule; the message says why, in one sentence."""


def parse(text: str) -> dict[str, str]:
    """The five fields of ``text`` ({"minute", "hour", "day_of_month", "month_of_year",
    "day_of_week"}); ``daily at 02:30`` is ``30 2 * * *``. Raises ``CronError``."""
    text = (text or "").strip()
    if not text:
        raise CronError("Give a cron expression (minute hour day month weekday) or 'daily at HH:MM'.")
    if len(text) > MAX_TEXT:
        raise CronError(f"At most {MAX_TEXT} characters.")
    daily = DAILY.match(text)
    if daily:
        hour, minute = int(daily.group(1)), int(daily.group(2))
        if hour > 23 or minute > 59:
            raise CronError(f"{hour:02d}:{minute:02d} is no time of day (00:00 to 23:59).")
        return dict(zip(FIELDS, (str(minute), str(hour), "*", "*", "*"), strict=True))
    parts = text.split()
    if len(parts) != len(FIELDS):
        raise CronError(
            f"A cron expression has 5 fields (minute hour day month weekday), not {len(parts)}: "
            "e.g. '0 2 * * *', or write 'daily at 02:00'."
        )
    for name, part in zip(FIELDS, parts, strict=True):
        if not FIELD.match(part):
            raise CronError(f"The {name.replace('_', ' ')} field {part!r} has characters cron does not read.")
    return dict(zip(FIELDS, parts, strict=True))


def expression(fields: dict[str, str]) -> str:
    """The five fields back as one cron expression."""
    return " ".join(fields[name] for name in FIELDS)


def check_zone(name: str) -> str:
    """``name`` when it is an IANA time zone (``Europe/Berlin``, ``UTC``); raises ``CronError``."""
    name = (name or "").strip()
    try:
        if not name or len(name) > 63:
            raise ValueError
        zoneinfo.ZoneInfo(name)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise CronError(f"{name!r} is no IANA time zone (e.g. UTC, Europe/Berlin).") from None
    return name
