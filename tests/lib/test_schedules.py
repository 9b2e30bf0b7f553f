"""The schedule text: cron fields or 'daily at HH:MM', and time zones."""

from __future__ import annotations

import pytest

from portal.lib.watching import schedules


def test_daily_at_is_a_cron_expression():
    assert schedules.expression(schedules.parse("daily at 02:00")) == "0 2 * * *"
    assert schedules.expression(schedules.parse("  Daily at 7:05 UTC ")) == "5 7 * * *"
    assert schedules.expression(schedules.parse("*/15 1-5 * jan mon-fri")) == "*/15 1-5 * jan mon-fri"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "Give a cron expression"),
        ("0 2 * *", "5 fields"),
        ("0 2 * * * *", "not 6"),
        ("daily at 24:00", "no time of day"),
        ("0 2 * * $(id)", "day of week field"),
        ("x" * 121, "At most 120"),
    ],
)
def test_what_is_no_schedule_says_why(text, says):
    with pytest.raises(schedules.CronError, match=says.replace("(", r"\(").replace("$", r"\$")):
        schedules.parse(text)


def test_time_zones_are_iana_names():
    assert schedules.check_zone("Europe/Berlin") == "Europe/Berlin" and schedules.check_zone("UTC") == "UTC"
    for bad in ("", "Mars/Olympus", "../etc/passwd", "x" * 64):
        with pytest.raises(schedules.CronError, match="no IANA time zone"):
            schedules.check_zone(bad)
