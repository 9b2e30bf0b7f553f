"""The schedule form of a scenario: when (cron or 'daily at HH:MM'), the time zone, on or off."""

from __future__ import annotations

import zoneinfo

from django import forms

from portal.schedules import services

ZONES = sorted(zoneinfo.available_timezones() | {"UTC"})


class ScheduleForm(forms.Form):
    when = forms.CharField(
        label="When",
        max_length=120,
        help_text="Five cron fields (minute hour day month weekday), e.g. 0 2 * * 1-5, or: daily at 02:00.",
    )
    time_zone = forms.ChoiceField(
        label="Time zone",
        choices=[(z, z) for z in ZONES],
        initial="UTC",
        help_text="The cron is read in this zone (daylight saving included).",
    )
    enabled = forms.BooleanField(label="Enabled", required=False, initial=True)

    def clean(self) -> dict:
        data = super().clean()
        if "when" in data and "time_zone" in data:
            try:
                services.clean(data["when"], data["time_zone"])
            except services.ScheduleError as exc:
                self.add_error("when", str(exc))
        return data
