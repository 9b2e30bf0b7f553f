from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator

from portal.lib.protocol import ARM_SCHEMES, ARMS
from portal.runs import defaults
from portal.targets.validators import check_url

ARM_LABELS = {
    "plain": "plain — HTTP, keep-alive (baseline)",
    "tls": "tls — HTTPS, keep-alive (one handshake per user)",
    "plain_new": "plain_new — HTTP, new TCP connection per request (control for tls_new)",
    "tls_new": "tls_new — HTTPS, new connection and full handshake per request",
    "tls_resumed": "tls_resumed — HTTPS, new connection per request, session resumption",
}
# The client owns these: they define connection handling and framing, which the arms control.
RESERVED_HEADERS = {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade"}
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
STATUS_ITEM = re.compile(r"^([1-5])xx$|^([1-5][0-9][0-9])$")


def parse_paths(text: str) -> list[dict]:
    """``/path [weight]`` per line → [{"path", "weight"}]; blank lines and ``#`` comments skipped."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        path, _, weight_text = line.partition(" ")
        if not path.startswith("/"):
            raise forms.ValidationError(f"Line {number}: a path must start with / (got {path!r}).")
        if any(ch.isspace() or ord(ch) < 32 for ch in path) or "#" in path:
            raise forms.ValidationError(f"Line {number}: the path has spaces, control characters or a #.")
        weight_text = weight_text.strip()
        try:
            weight = float(weight_text) if weight_text else 1.0
        except ValueError:
            message = f"Line {number}: the weight {weight_text!r} is not a number."
            raise forms.ValidationError(message) from None
        if not 0 < weight <= 1000:
            raise forms.ValidationError(f"Line {number}: the weight must be above 0 and at most 1000.")
        out.append({"path": path, "weight": weight})
    if len(out) > 50:
        raise forms.ValidationError("At most 50 paths.")
    return out


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` per line → dict; reserved and malformed headers are field errors."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        name, sep, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not HEADER_NAME.match(name):
            raise forms.ValidationError(f"Line {number}: expected 'Name: value'.")
        if name.lower() in RESERVED_HEADERS:
            raise forms.ValidationError(f"Line {number}: {name} is set by Tollgate for each arm.")
        if name.lower() == "authorization":
            raise forms.ValidationError(f"Line {number}: use the Authentication fields for Authorization.")
        if any(ord(ch) < 32 and ch != "\t" for ch in value):
            raise forms.ValidationError(f"Line {number}: control characters in the value.")
        out[name] = value
    return out


def parse_status(text: str) -> list[int]:
    """``200, 204, 3xx`` → sorted codes; empty → [] (meaning any 2xx)."""
    codes: set[int] = set()
    for item in re.split(r"[,\s]+", text.strip()):
        if not item:
            continue
        match = STATUS_ITEM.match(item.lower())
        if not match:
            raise forms.ValidationError(f"{item!r} is not a status code (e.g. 200) or class (e.g. 2xx).")
        if match.group(1):
            first = int(match.group(1)) * 100
            codes.update(range(first, first + 100))
        else:
            codes.add(int(match.group(2)))
    return sorted(codes)


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
        initial=list(defaults.ARMS),
    )
    users = forms.IntegerField(label="Virtual users", min_value=1, initial=defaults.USERS)
    spawn_rate = forms.FloatField(
        label="Spawn rate (users/s)", min_value=0.1, max_value=1000, initial=defaults.SPAWN_RATE
    )
    warmup_s = forms.FloatField(
        label="Warm-up (s)",
        min_value=0,
        initial=defaults.WARMUP_S,
        help_text="Excluded from every statistic.",
    )
    duration_s = forms.FloatField(
        label="Measured duration per arm (s)",
        min_value=1,
        initial=defaults.DURATION_S,
        help_text=defaults.DURATION_HELP,
    )
    paths = forms.CharField(
        label="Paths and weights",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "/1k 1\n/2k 2\n/4k 1\n/logo.png 1"}),
        help_text="Optional. One request target per line with an optional weight; sent to each arm's host. "
        "Empty: the path of the URLs above.",
    )
    headers = forms.CharField(
        label="Request headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Accept-Language: en\nX-Client: 100"}),
        help_text="Optional, 'Name: value' per line. Stored encrypted; never shown again.",
    )
    auth_type = forms.ChoiceField(
        label="Authentication",
        required=False,
        choices=[("none", "none"), ("basic", "Basic (user + password)"), ("bearer", "Bearer token")],
        initial="none",
        help_text="Sent pre-emptively with every request: no 401 round trip is measured.",
    )
    auth_user = forms.CharField(label="User", max_length=200, required=False)
    auth_secret = forms.CharField(
        label="Password or token",
        max_length=4000,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted; never shown again.",
    )
    expected_status = forms.CharField(
        label="Expected status",
        max_length=200,
        required=False,
        help_text="e.g. 200, 204 or 2xx. Empty: any 2xx. Anything else fails the status check.",
    )
    think_time_s = forms.FloatField(
        label="Think time (s)",
        required=False,
        min_value=0,
        max_value=600,
        initial=defaults.THINK_TIME_S,
        help_text="Closed loop only (clear the arrival rate): pause after each request.",
    )
    arrival_rate = forms.FloatField(
        label="Fixed arrival rate (req/s)",
        required=False,
        min_value=0.1,
        initial=defaults.ARRIVAL_RATE,
        help_text=defaults.ARRIVAL_RATE_HELP,
    )
    rounds = forms.IntegerField(
        label="Rounds",
        required=False,
        min_value=1,
        initial=defaults.ROUNDS,
        help_text="Arms run interleaved (A B C A B C …); 3 or more give confidence intervals over rounds.",
    )
    follow_redirects = forms.BooleanField(
        label="Resolve redirects before measuring",
        required=False,
        initial=True,
        help_text="The final URL is measured and the report says so.",
    )
    probe_server = forms.BooleanField(
        label="Probe the server over SSH",
        required=False,
        help_text="Samples the server process's CPU in every arm (CPU-ms per request). Uses the target's SSH "
        "access (set it up on the target's SSH page).",
    )
    openssl_speed = forms.BooleanField(label="Run openssl speed on the server after the load", required=False)
    cryptsetup = forms.BooleanField(
        label="Run cryptsetup benchmark on the server after the load", required=False
    )
    local_process = forms.CharField(
        label="Sample a local process",
        max_length=15,
        required=False,
        help_text="Optional: a process on the generator's own host to sample like the server (no SSH), "
        "e.g. tollgate-demo, the demo target's workers (15 characters at most, as pgrep -x sees them).",
    )
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

    def __init__(self, *args, keep_secret: bool = False, **kwargs) -> None:
        # keep_secret: a saved scenario holds an encrypted secret that a blank field keeps.
        self.keep_secret = keep_secret
        super().__init__(*args, **kwargs)
        # Limits come from settings so operators can change them without a code change.
        limits = {
            "users": settings.TOLLGATE_MAX_USERS,
            "duration_s": settings.TOLLGATE_MAX_DURATION_S,
            "warmup_s": settings.TOLLGATE_MAX_WARMUP_S,
            "rounds": settings.TOLLGATE_MAX_ROUNDS,
            "arrival_rate": settings.TOLLGATE_MAX_ARRIVAL_RATE,
        }
        for name, limit in limits.items():
            field = self.fields[name]
            field.max_value = limit
            field.validators.append(MaxValueValidator(limit))
            field.widget.attrs["max"] = limit

    def clean_plain_url(self) -> str:
        value = self.cleaned_data["plain_url"]
        return check_url(value, "http") if value else value

    def clean_tls_url(self) -> str:
        value = self.cleaned_data["tls_url"]
        return check_url(value, "https") if value else value

    def clean_paths(self) -> list[dict]:
        return parse_paths(self.cleaned_data["paths"])

    def clean_headers(self) -> dict[str, str]:
        return parse_headers(self.cleaned_data["headers"])

    def clean_expected_status(self) -> list[int]:
        return parse_status(self.cleaned_data["expected_status"])

    def clean(self) -> dict:
        data = super().clean()
        auth = data.get("auth_type") or "none"
        if auth == "basic":
            if not data.get("auth_user"):
                self.add_error("auth_user", "Basic authentication needs a user.")
            elif ":" in data["auth_user"]:
                self.add_error("auth_user", "A Basic user name cannot contain ':'.")
        if auth in ("basic", "bearer") and not data.get("auth_secret") and not self.keep_secret:
            self.add_error("auth_secret", "Enter the password or token (it is never shown again).")
        if auth == "bearer" and any(ch.isspace() for ch in data.get("auth_secret") or ""):
            self.add_error("auth_secret", "A bearer token cannot contain spaces.")
        if data.get("think_time_s") and data.get("arrival_rate"):
            # The open loop keeps its schedule whatever the think time: it would be silently ignored.
            self.add_error(
                "think_time_s",
                "Think time applies to a closed loop only: clear the arrival rate to use it "
                "(--closed-loop on the command line).",
            )
        arms = data.get("arms") or []
        for scheme, field in (("http", "plain_url"), ("https", "tls_url")):
            needing = [arm for arm in arms if ARM_SCHEMES[arm] == scheme]
            if needing and not data.get(field) and field not in self.errors:
                self.add_error(field, f"Required for the arm(s) {', '.join(needing)}.")
        return data

    def engine_config(self) -> dict:
        """The engine config (portal.lib.protocol.EngineConfig) for the cleaned values."""
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
            "paths": data.get("paths") or [],
            "expected_status": data.get("expected_status") or [],
            "think_time_s": data.get("think_time_s") or 0.0,
            "arrival_rate": data.get("arrival_rate"),
            "rounds": data.get("rounds") or 1,
            "follow_redirects": bool(data.get("follow_redirects")),
            **self.probe_config(),
        }

    def probe_config(self) -> dict:
        data = self.cleaned_data
        probes = {}
        if data.get("probe_server"):
            probes.update(
                ssh=True,
                openssl_speed=bool(data.get("openssl_speed")),
                cryptsetup=bool(data.get("cryptsetup")),
            )
        if data.get("local_process"):
            probes["local_process"] = data["local_process"]
        return {"probes": probes} if probes else {}

    def clean_local_process(self) -> str:
        value = (self.cleaned_data.get("local_process") or "").strip()
        if value and not re.match(r"^[A-Za-z0-9_.:+-]{1,15}$", value):
            raise forms.ValidationError(
                "A process name: letters, digits and ._:+- only, at most 15 characters."
            )
        return value

    def secrets(self) -> dict:
        """Headers and credentials: sealed (encrypted) by the caller, never stored in clear."""
        data = self.cleaned_data
        out: dict = {}
        if data.get("headers"):
            out["headers"] = data["headers"]
        auth = data.get("auth_type") or "none"
        if auth != "none" and data.get("auth_secret"):
            out["auth"] = {"type": auth, "user": data.get("auth_user") or "", "secret": data["auth_secret"]}
        return out

    def target_name_or_default(self) -> str:
        data = self.cleaned_data
        if data.get("target_name"):
            return data["target_name"]
        url = data.get("tls_url") or data.get("plain_url")
        return urlsplit(url).hostname or url
