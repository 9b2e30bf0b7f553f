"""The schedule text: cron fields or 'daily at HH:MM', and time zones."""

from __future__ import annotations

import pytest

from portal.lib.watching import cronspec


def test_daily_at_is_a_cron_expression():
    assert cronspec.expression(cronspec.parse("daily at 02:00")) == "0 2 * * *"
    assert cronspec.expression(cronspec.parse("  Daily at 7:05 UTC ")) == "5 7 * * *"
    assert cronspec.expression(cronspec.parse("*/15 1-5 * jan mon-fri")) == "*/15 1-5 * jan mon-fri"


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
    with pytest.raises(cronspec.CronError, match=says.replace("(", r"\(").replace("$", r"\$")):
        cronspec.parse(text)


def test_time_zones_are_iana_names():
    assert cronspec.check_zone("Europe/Berlin") == "Europe/Berlin" and cronspec.check_zone("UTC") == "UTC"
    for bad in ("", "Mars/Olympus", "../etc/passwd", "x" * 64):
        with pytest.raises(cronspec.CronError, match="no IANA time zone"):
            cronspec.check_zone(bad)
