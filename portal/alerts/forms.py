"""A new alert channel: its kind and where it goes (an e-mail address, or a URL the outbound address
policy allows, checked as a scenario's callback URL is)."""

from __future__ import annotations

from django import forms
from django.core.validators import validate_email

from portal.alerts.models import AlertChannel
from portal.validators import check_callback_url


class ChannelForm(forms.Form):
    kind = forms.ChoiceField(choices=AlertChannel.Kind.choices)
    target = forms.CharField(
        label="Address or URL",
        max_length=500,
        help_text="E-mail: an address. Incoming webhook: the URL Slack or Teams gave you. Signed callback: "
        "your receiver's URL (signed with the scenario's webhook secret, as callbacks are).",
    )
    improvements = forms.BooleanField(label="Also when a run improved", required=False)

    def __init__(self, *args, project, **kwargs) -> None:
        self.project = project
        super().__init__(*args, **kwargs)

    def clean(self) -> dict:
        data = super().clean()
        kind, target = data.get("kind"), (data.get("target") or "").strip()
        if not kind or not target:
            return data
        try:
            if kind == AlertChannel.Kind.EMAIL:
                validate_email(target)
            else:
                target = check_callback_url(target)
        except forms.ValidationError as exc:
            self.add_error("target", exc)
            return data
        fingerprint = AlertChannel.fingerprint_of(target)
        if AlertChannel.objects.filter(project=self.project, kind=kind, fingerprint=fingerprint).exists():
            self.add_error("target", "This project has this channel already.")
        data["target"] = target
        return data
