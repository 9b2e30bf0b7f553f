from __future__ import annotations

from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator

from workers.engine.protocol import ARM_SCHEMES, ARMS

ARM_LABELS = {
    "plain": "plain — HTTP, keep-alive (baseline)",
    "tls": "tls — HTTPS, keep-alive (one handshake per user)",
    "plain_new": "plain_new — HTTP, new TCP connection per request (control for tls_new)",
    "tls_new": "tls_new — HTTPS, new connection and full handshake per request",
    "tls_resumed": "tls_resumed — HTTPS, new connection per request, session resumption",
}
DEFAULT_ARMS = ["plain", "tls", "tls_new"]


def _check_url(value: str, scheme: str) -> str:
    parts = urlsplit(value)
    if parts.scheme != scheme:
        raise forms.ValidationError(f"Needs an {scheme}:// URL (got {parts.scheme or 'no'} scheme).")
    if not parts.hostname:
        raise forms.ValidationError("The URL has no host.")
    if parts.username or parts.password:
        raise forms.ValidationError("Put credentials in the scenario's auth, not in the URL.")
    if parts.fragment:
        raise forms.ValidationError("A URL fragment is never sent to the server; remove it.")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise forms.ValidationError("The port is not a number between 0 and 65535.") from None
    return value


class RunForm(forms.Form):
    target_name = forms.CharField(
        max_length=200, required=False, help_text="Optional; defaults to the host name."
    )
    plain_url = forms.URLField(
        label="Plain URL",
        max_length=500,
        required=False,
        assume_scheme="http",
        help_text="http:// URL for the plain arms, e.g. http://127.0.0.1:8081/1k",
    )
    tls_url = forms.URLField(
        label="TLS URL",
        max_length=500,
        required=False,
        assume_scheme="https",
        help_text="https:// URL for the TLS arms; may differ in host or port.",
    )
    arms = forms.MultipleChoiceField(
        choices=[(arm, ARM_LABELS[arm]) for arm in ARMS],
        widget=forms.CheckboxSelectMultiple,
        initial=DEFAULT_ARMS,
    )
    users = forms.IntegerField(label="Virtual users", min_value=1, initial=4)
    spawn_rate = forms.FloatField(label="Spawn rate (users/s)", min_value=0.1, max_value=1000, initial=4)
    warmup_s = forms.FloatField(
        label="Warm-up (s)", min_value=0, initial=2, help_text="Excluded from every statistic."
    )
    duration_s = forms.FloatField(label="Measured duration per arm (s)", min_value=1, initial=10)
    verify_tls = forms.BooleanField(
        label="Verify TLS certificate",
        required=False,
        initial=True,
        help_text="Untick for self-signed certificates (the demo target).",
    )
    save_as = forms.CharField(
        label="Save as scenario",
        max_length=200,
        required=False,
        help_text="Optional name to reuse these settings later.",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Limits come from settings so operators can change them without a code change.
        limits = {
            "users": settings.TOLLGATE_MAX_USERS,
            "duration_s": settings.TOLLGATE_MAX_DURATION_S,
            "warmup_s": settings.TOLLGATE_MAX_WARMUP_S,
        }
        for name, limit in limits.items():
            field = self.fields[name]
            field.max_value = limit
            field.validators.append(MaxValueValidator(limit))
            field.widget.attrs["max"] = limit

    def clean_plain_url(self) -> str:
        value = self.cleaned_data["plain_url"]
        return _check_url(value, "http") if value else value

    def clean_tls_url(self) -> str:
        value = self.cleaned_data["tls_url"]
        return _check_url(value, "https") if value else value

    def clean(self) -> dict:
        data = super().clean()
        arms = data.get("arms") or []
        for scheme, field in (("http", "plain_url"), ("https", "tls_url")):
            needing = [arm for arm in arms if ARM_SCHEMES[arm] == scheme]
            if needing and not data.get(field) and field not in self.errors:
                self.add_error(field, f"Required for the arm(s) {', '.join(needing)}.")
        return data

    def engine_config(self) -> dict:
        """The engine config (workers.engine.protocol.EngineConfig) for the cleaned values."""
        data = self.cleaned_data
        arms = [arm for arm in ARMS if arm in data["arms"]]  # canonical order
        urls = {"http": data.get("plain_url"), "https": data.get("tls_url")}
        return {
            "arms": [{"name": arm, "url": urls[ARM_SCHEMES[arm]]} for arm in arms],
            "users": data["users"],
            "spawn_rate": data["spawn_rate"],
            "warmup_s": data["warmup_s"],
            "duration_s": data["duration_s"],
            "verify_tls": data["verify_tls"],
        }

    def target_name_or_default(self) -> str:
        data = self.cleaned_data
        if data.get("target_name"):
            return data["target_name"]
        url = data.get("tls_url") or data.get("plain_url")
        return urlsplit(url).hostname or url
