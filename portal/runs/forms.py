from __future__ import annotations

import math

from django import forms
from django.conf import settings

from portal.lib.report import evidence, targetnames
from portal.lib.runs import quotas
from portal.lib.runs.names import PROCESS_NAME_MAX
from portal.lib.runs.protocol import ARM_SCHEMES, ARMS
from portal.lib.runs.runspec import ENGINE_KEYS, OPTIONS
from portal.lib.tls import clientcerts
from portal.runs.fields import (
    MAX_HEADERS_FIELD,
    SATURATION_FIELDS,
    SpecFields,
    TuningFields,
    parse_headers,
    parse_paths,
    parse_status,
)
from portal.runs.quotas import count_problems, limits_for
from portal.scenarios.secrets import SavedSecrets, arm_origins, http_arms
from portal.targets import verification
from portal.targets.forms import SecretTextarea
from portal.targets.models import ClientCertificate, Target
from portal.validators import check_url, non_ascii, validate_process_name, validate_text

# The form fields behind a spec option that has no field of its own (portal.lib.runs.runspec: custom).
CUSTOM_FIELDS = {
    "auth": ("auth_type", "auth_user", "auth_secret"),
    "probes": ("probe_server", "openssl_speed", "cryptsetup", "local_process"),
    "saturation": SATURATION_FIELDS,
    "client_cert": ("client_cert_pem", "client_key_pem"),
}
# Fields that decide where the headers and credentials go: checked once these are clean.
SECRET_INPUTS = ("arms", "plain_url", "tls_url", "headers", "auth_secret")


class RunForm(TuningFields, SpecFields):
    """The run's options: the fields of ``portal.lib.runs.runspec.RunSpec`` (``portal.runs.fields``) and
    the hand-written ones behind its custom options (URLs, headers, credentials, probes, saturation)."""

    field_order = [
        *(name for key, opt in OPTIONS.items() for name in CUSTOM_FIELDS.get(key, (opt.form_name,))),
        "save_as",
    ]
    target_name = forms.CharField(
        max_length=OPTIONS["target_name"].bounds["max_length"],
        required=False,
        validators=[validate_text],
        help_text=OPTIONS["target_name"].help,
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
    headers = forms.CharField(
        label=OPTIONS["headers"].label,
        required=False,
        max_length=MAX_HEADERS_FIELD,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Accept-Language: en\nX-Client: 100"}),
        help_text=OPTIONS["headers"].help,
    )
    auth_type = forms.ChoiceField(
        label=OPTIONS["auth"].label,
        required=False,
        choices=[("none", "none"), ("basic", "Basic (user + password)"), ("bearer", "Bearer token")],
        initial="none",
        help_text="Sent pre-emptively with every request: no 401 round trip is measured.",
    )
    auth_user = forms.CharField(
        label="User",
        max_length=200,
        required=False,
        validators=[validate_text],
        help_text="Sealed with the password; blank on a saved scenario keeps its saved user and password.",
    )
    auth_secret = forms.CharField(
        label="Password or token",
        max_length=4000,
        required=False,
        strip=False,
        validators=[validate_text],
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted; never shown again.",
    )
    client_cert_pem = forms.CharField(
        label=OPTIONS["client_cert"].label,
        required=False,
        max_length=clientcerts.MAX_PEM_CHARS,
        widget=SecretTextarea(attrs={"rows": 2, "placeholder": "-----BEGIN CERTIFICATE-----"}),
        help_text=OPTIONS["client_cert"].description,
    )
    client_key_pem = forms.CharField(
        label="Client certificate's private key",
        required=False,
        max_length=clientcerts.MAX_PEM_CHARS,
        widget=SecretTextarea(attrs={"rows": 2, "placeholder": "the private key, PEM (unencrypted)"}),
        help_text="Unencrypted PEM. Stored encrypted with the certificate; never shown again.",
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
        required=False,
        validators=[validate_process_name],
        widget=forms.TextInput(attrs={"maxlength": PROCESS_NAME_MAX}),
        help_text="Optional: a process on the generator's own host to sample like the server (no SSH), "
        "e.g. tollgate-caddy, the demo target's Caddy (15 characters at most, as pgrep -x sees them).",
    )
    save_as = forms.CharField(
        label="Save as scenario",
        max_length=200,
        required=False,
        validators=[validate_text],
        help_text="Optional name to reuse these settings later.",
    )

    def __init__(
        self, *args, saved: SavedSecrets | None = None, project=None, queueing: bool = True, **kwargs
    ) -> None:
        # saved: the sealed headers and credentials of the scenario the run starts from; a blank
        # field keeps them (they are never rendered back), for the origins they were saved for only.
        # project: whose quota applies (portal.runs.quotas; None: the operator's defaults) and whose
        # targets the verification check looks at (None: no check). queueing False: the values are
        # saved (a scenario), not queued, so the project's runs in flight and of the day do not count.
        self.saved = saved
        self.queueing = queueing
        self.project = project
        self._secrets: dict = {}
        self.unverified_target: Target | None = None
        self.quota_refusals: list[str] = []
        super().__init__(*args, **kwargs)
        if not settings.TOLLGATE_LOCAL_PROBE:
            # It samples the worker's own machine: the operator's choice (TOLLGATE_LOCAL_PROBE).
            del self.fields["local_process"]
        self.limits = limits_for(project)
        self.project_name = project.name if project is not None else "(none)"
        for name, (limit, _) in quotas.FIELD_LIMITS.items():
            self.fields[name].widget.attrs["max"] = getattr(self.limits, limit)

    def limits_line(self) -> str:
        """What the run form states under its title: the limits of this project."""
        return quotas.summary(self.limits)

    def clean_plain_url(self) -> str:
        value = self.cleaned_data["plain_url"]
        return check_url(value, "http") if value else value

    def clean_tls_url(self) -> str:
        value = self.cleaned_data["tls_url"]
        return check_url(value, "https") if value else value

    def clean_paths(self) -> list[dict]:
        return parse_paths(self.cleaned_data["paths"] or "")

    def clean_headers(self) -> dict[str, str]:
        return parse_headers(self.cleaned_data["headers"])

    def clean_expected_status(self) -> list[int]:
        return parse_status(self.cleaned_data["expected_status"] or "")

    def clean(self) -> dict:
        data = super().clean()
        self._clean_auth(data)
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
        if not any(name in self.errors for name in SECRET_INPUTS):
            self._clean_secrets(data)
        if self.project is not None and not any(name in self.errors for name in ("plain_url", "tls_url")):
            self._clean_verification(data)
        self.clean_tuning(data)
        self._clean_client_cert(data)
        self._clean_quota(data)
        return data

    def _clean_client_cert(self, data: dict) -> None:
        """A typed pair is checked (it is stored on the target when the run starts); a run that
        presents a certificate needs one typed or held by its target."""
        self._client_cert = None
        typed = (data.get("client_cert_pem") or "", data.get("client_key_pem") or "")
        if any(text.strip() for text in typed):
            try:
                self._client_cert = clientcerts.load_pair(*typed)
            except clientcerts.ClientCertError as exc:
                self.add_error("client_cert_pem", f"{str(exc)[:1].upper()}{str(exc)[1:]}.")
            return
        arms = data.get("arms") or []
        if clientcerts.MTLS_ARM not in arms or self.project is None:
            return
        held = ClientCertificate.objects.filter(
            target__project=self.project,
            target__plain_url=data.get("plain_url") or "",
            target__tls_url=data.get("tls_url") or "",
        )
        if not held.exists():
            self.add_error(
                "client_cert_pem",
                f"The {clientcerts.MTLS_ARM} arm presents the target's client certificate and this "
                f"target holds none: {clientcerts.NO_CERTIFICATE_HINT}.",
            )

    def client_cert(self) -> clientcerts.ClientCert | None:
        """The pair typed in the form (checked), stored on the target when the run starts."""
        return getattr(self, "_client_cert", None)

    def _clean_verification(self, data: dict) -> None:
        """No load on an address outside the allow-list before the target is verified."""
        urls = [data.get("plain_url") or "", data.get("tls_url") or ""]
        target = Target.objects.filter(project=self.project, plain_url=urls[0], tls_url=urls[1]).first()
        problem = verification.form_problem(target, [url for url in urls if url])
        if problem:
            self.unverified_target = target
            self.add_error(None, problem)

    def _clean_quota(self, data: dict) -> None:
        """Above a limit of the project: a field error, or the form's own (request budget, runs in
        flight, runs per day); nothing is queued."""
        config = {key: data.get(OPTIONS[key].form_name) for key in ENGINE_KEYS}  # as cleaned so far
        config["arms"] = data.get("arms") or []
        refusals = quotas.check(self.limits, config, self.project_name)
        if self.project is not None and self.queueing:
            refusals += [(None, message) for message in count_problems(self.project, self.limits)]
        for field, message in refusals:
            if field is None or field not in self.errors:
                self.add_error(field, message)
        self.quota_refusals = [message for _, message in refusals]  # for the audit log

    def _clean_auth(self, data: dict) -> None:
        auth = data.get("auth_type") or "none"
        saved_user = self._saved_user(data)
        if auth == "basic":
            if not data.get("auth_user") and not saved_user:
                self.add_error("auth_user", "Basic authentication needs a user.")
            elif ":" in (data.get("auth_user") or ""):
                self.add_error("auth_user", "A Basic user name cannot contain ':'.")
        saved_auth = bool(self.saved and self.saved.secrets.get("auth"))
        if auth in ("basic", "bearer") and not data.get("auth_secret") and not saved_auth:
            self.add_error("auth_secret", "Enter the password or token (it is never shown again).")
        if auth == "bearer" and non_ascii(data.get("auth_secret") or ""):
            self.add_error("auth_secret", "A bearer token is printable ASCII without spaces.")

    def _saved_user(self, data: dict) -> str:
        """The saved scenario's sealed Basic user, which a blank user field keeps, with its password
        (a new password typed needs its user typed too)."""
        saved = (self.saved.secrets if self.saved else {}).get("auth") or {}
        if saved.get("type") != "basic" or data.get("auth_secret"):
            return ""
        return saved.get("user") or ""

    def _kept(self, data: dict) -> dict:
        """The saved secrets that blank fields keep."""
        saved = self.saved.secrets if self.saved else {}
        kept = {}
        if saved.get("headers") and not data.get("headers"):
            kept["headers"] = saved["headers"]
        if saved.get("auth") and (data.get("auth_type") or "none") != "none" and not data.get("auth_secret"):
            kept["auth"] = saved["auth"]
        return kept

    def _clean_secrets(self, data: dict) -> None:
        """Saved secrets go only to the origins they were saved for; no secret goes over plain HTTP
        unless the user said so."""
        kept = self._kept(data)
        foreign = self.saved.foreign(arm_origins({"arms": self._arms(data)})) if kept else []
        if foreign:
            labels = {"headers": ("headers", "headers"), "auth": ("auth_secret", "credentials")}
            for key in kept:
                field, what = labels[key]
                self.add_error(
                    field,
                    f"The saved {what} belong to {', '.join(self.saved.origins)}; enter them again for "
                    f"{', '.join(foreign)} (or start from an empty form).",
                )
            return
        headers = data.get("headers") or kept.get("headers")
        self._secrets = {"headers": headers} if headers else {}
        auth = data.get("auth_type") or "none"
        secret = data.get("auth_secret") or kept.get("auth", {}).get("secret")
        if auth != "none" and secret:
            user = data.get("auth_user") or self._saved_user(data)
            self._secrets["auth"] = {"type": auth, "user": user, "secret": secret}
        plain = http_arms(data.get("arms") or [])
        if self._secrets and plain and not data.get("send_credentials_over_http"):
            self.add_error(
                "send_credentials_over_http",
                f"The arm(s) {', '.join(plain)} would send the headers and credentials unencrypted: allow "
                "sending them over plain HTTP, or choose TLS arms only.",
            )

    def _arms(self, data: dict) -> list[dict]:
        """The arms in canonical order, each with the URL of its scheme."""
        urls = {"http": data.get("plain_url"), "https": data.get("tls_url")}
        return [{"name": arm, "url": urls[ARM_SCHEMES[arm]]} for arm in ARMS if arm in data["arms"]]

    def engine_config(self) -> dict:
        """The engine config (portal.lib.runs.protocol.EngineConfig) for the cleaned values."""
        data = self.cleaned_data
        config = {"arms": self._arms(data)}
        for key in ENGINE_KEYS:  # the spec's options as cleaned; a blank optional one: its default
            value = data.get(OPTIONS[key].form_name)
            config[key] = OPTIONS[key].default if value is None or value == "" else value
        config["arrival_rate"] = data.get("arrival_rate")  # blank: a closed loop, not the default
        return {**config, **self.tuning_config(), **self.probe_config()}

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

    def secrets(self) -> dict:
        """Headers and credentials, typed or kept from the saved scenario: ``{"headers": {...},
        "auth": {"type", "user", "secret"}}``, sealed (encrypted) by the caller, never stored in clear."""
        return self._secrets

    def target_name_or_default(self) -> str:
        data = self.cleaned_data
        if data.get("target_name"):
            return data["target_name"]
        return targetnames.default_name(data.get("plain_url"), data.get("tls_url"))

    def too_short_for_intervals(self) -> bool:
        """Whether the duration and rounds (as typed, or as pre-filled) are too short for confidence
        intervals; ``static/js/run_form.js`` keeps the form's note in step while the user types."""

        def value(name: str) -> float | None:
            raw = self.data.get(name) if self.is_bound else self.initial.get(name, self.fields[name].initial)
            try:
                number = float(raw) if raw not in (None, "") else None
            except (TypeError, ValueError):
                return None
            return number if number is not None and math.isfinite(number) else None  # "nan", "1e309"

        return evidence.too_short_for_intervals(value("duration_s"), int(value("rounds") or 1))
