from __future__ import annotations

from django import forms

from portal import outbound
from portal.lib.runs.names import PROCESS_NAME_MAX
from portal.lib.runs.protocol import ARM_SCHEMES
from portal.lib.security.sshkeys import (
    KeyFormatError,
    key_from_known_hosts,
    known_hosts_name,
    load_private_key,
)
from portal.lib.tls import clientcerts
from portal.targets import editing
from portal.targets.models import Target
from portal.validators import (
    check_outbound,
    check_url,
    non_ascii,
    validate_process_name,
    validate_text,
)


class SshAccessForm(forms.Form):
    host = forms.CharField(
        max_length=255, help_text="The server's name or address, as the worker reaches it."
    )
    port = forms.IntegerField(min_value=1, max_value=65535, initial=22)
    username = forms.CharField(max_length=64, initial="tollgate")
    key_source = forms.ChoiceField(
        label="Key",
        choices=[
            ("keep", "keep the stored key"),
            ("generate", "generate a new Ed25519 key"),
            ("paste", "paste a private key"),
        ],
        initial="generate",
        widget=forms.RadioSelect,
    )
    private_key = forms.CharField(
        label="Private key",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Only with 'paste': an unencrypted OpenSSH or PEM key. Stored encrypted, never shown.",
    )
    known_hosts = forms.CharField(
        label="Pinned host key (optional)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text="A known_hosts line for the server (ssh-keyscan). Empty: pinned on first use.",
    )
    server_process = forms.CharField(
        label="Server process name",
        validators=[validate_process_name],
        widget=forms.TextInput(attrs={"maxlength": PROCESS_NAME_MAX}),
        initial="nginx",
        help_text="Processes sampled for CPU in every arm (exact name, as pgrep -x sees it): nginx, icman…",
    )

    def __init__(self, *args, has_key: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.has_key = has_key
        if not has_key:
            self.fields["key_source"].choices = self.fields["key_source"].choices[1:]

    def clean_host(self) -> str:
        value = self.cleaned_data["host"]
        bad = non_ascii(value)
        if bad or value.startswith("-"):
            # Passed to paramiko as is; an international name goes in its xn-- form.
            shown = f" ({bad})" if bad else ""
            raise forms.ValidationError(
                f"A host name or address: ASCII without spaces{shown}, not starting with -."
            )
        return value

    def clean_username(self) -> str:
        value = self.cleaned_data["username"]
        if non_ascii(value) or value.startswith("-"):
            raise forms.ValidationError("A user name: ASCII without spaces, not starting with -.")
        return value

    def clean(self) -> dict:
        data = super().clean()
        if data.get("key_source") == "paste":
            pem = (data.get("private_key") or "").strip()
            if not pem:
                self.add_error("private_key", "Paste the private key, or choose to generate one.")
            else:
                try:
                    load_private_key(pem + "\n")
                except KeyFormatError as exc:
                    self.add_error("private_key", str(exc).capitalize() + ".")
        known = (data.get("known_hosts") or "").strip()
        host, port = data.get("host"), data.get("port")
        if host and port:
            try:  # the probe checks again when it connects; this refuses it before it is stored
                check_outbound(outbound.check_host(host.strip(), port))
            except forms.ValidationError as exc:
                self.add_error("host", exc)
        if known and host and port and key_from_known_hosts(known, host, port) is None:
            self.add_error("known_hosts", f"No valid known_hosts line for {known_hosts_name(host, port)}.")
        return data


class TargetForm(forms.Form):
    """A target set up before its first run (e.g. to give it SSH access first)."""

    name = forms.CharField(max_length=200, validators=[validate_text])
    plain_url = forms.CharField(label="Plain URL", max_length=500, required=False)
    tls_url = forms.CharField(label="TLS URL", max_length=500, required=False)

    def clean_plain_url(self) -> str:
        value = self.cleaned_data["plain_url"].strip()
        return check_url(value, "http") if value else value

    def clean_tls_url(self) -> str:
        value = self.cleaned_data["tls_url"].strip()
        return check_url(value, "https") if value else value

    def clean(self) -> dict:
        data = super().clean()
        if not data.get("plain_url") and not data.get("tls_url") and not self.errors:
            raise forms.ValidationError("Give a plain URL, a TLS URL or both.")
        return data


class TargetEditForm(TargetForm):
    """A target's name and URLs corrected in place (``portal.targets.editing``): never onto the URLs
    of another target of the project, never leaving a saved scenario without the URL its arms need."""

    def __init__(self, *args, target: Target, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.target = target

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        plain_url, tls_url = data.get("plain_url") or "", data.get("tls_url") or ""
        other = (
            Target.objects.filter(project_id=self.target.project_id, plain_url=plain_url, tls_url=tls_url)
            .exclude(pk=self.target.pk)
            .first()
        )
        if other is not None:
            raise forms.ValidationError(
                f"Target {other.name} already has these URLs (runs with them join it): edit that target, "
                "or ask an owner to delete one of the two."
            )
        for name, arms in editing.scenarios_needing(self.target, plain_url, tls_url):
            field = "tls_url" if any(ARM_SCHEMES[arm] == "https" for arm in arms) else "plain_url"
            self.add_error(field, f"The scenario {name} runs the arm(s) {', '.join(arms)}: it needs a URL.")
        return data


class SecretTextarea(forms.Textarea):
    """A text area that never renders its value back (a private key, a certificate stored with it)."""

    def format_value(self, value):
        return None


class MtlsUrlForm(forms.Form):
    """Where the target's server asks for a client certificate, when not at its TLS URL: the
    ``tls_mtls`` arm goes there (``portal.runs.services.mtls_arm_to_target``). Blank: the TLS URL."""

    mtls_url = forms.CharField(
        label="mTLS URL",
        required=False,
        max_length=500,
        help_text="An https:// URL where the server asks for a client certificate (another port or name "
        "than the TLS URL's, so the other arms' handshakes stay without its request). Empty: the TLS URL.",
    )

    def clean_mtls_url(self) -> str:
        value = self.cleaned_data["mtls_url"].strip()
        return check_url(value, "https") if value else ""


class ClientCertForm(forms.Form):
    """A client certificate and its key for a target (mutual TLS), each as a PEM file or pasted; the
    pair is checked by ``portal.lib.tls.clientcerts.load_pair`` (``self.pair`` when valid). Nothing given
    is ever rendered back."""

    PARTS = (("cert", "certificate"), ("key", "private key"))

    cert_file = forms.FileField(
        label="Certificate file",
        required=False,
        help_text="PEM: the client certificate first, then any intermediates.",
    )
    key_file = forms.FileField(label="Private key file", required=False, help_text="PEM, unencrypted.")
    cert_pem = forms.CharField(
        label="…or paste the certificate",
        required=False,
        widget=SecretTextarea(
            attrs={"rows": 3, "placeholder": "-----BEGIN CERTIFICATE-----", "spellcheck": "false"}
        ),
    )
    key_pem = forms.CharField(
        label="…or paste the private key",
        required=False,
        widget=SecretTextarea(
            attrs={
                "rows": 3,
                "placeholder": "the private key, PEM (unencrypted)",
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
        help_text="Stored encrypted with the certificate; never shown again.",
    )

    def clean(self) -> dict:
        data = super().clean()
        texts = {part: self._text(data, part, what) for part, what in self.PARTS}
        if self.errors:
            return data
        try:
            self.pair = clientcerts.load_pair(texts["cert"] or "", texts["key"] or "")
        except clientcerts.ClientCertError as exc:
            raise forms.ValidationError(f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
        return data

    def _text(self, data: dict, part: str, what: str) -> str | None:
        """The PEM text of ``part`` from its file or its text area (not both); None on an error."""
        upload, typed = data.get(f"{part}_file"), (data.get(f"{part}_pem") or "").strip()
        if upload and typed:
            self.add_error(f"{part}_file", f"Give the {what} once: a file or pasted text, not both.")
            return None
        if not upload:
            return typed
        if upload.size > clientcerts.MAX_PEM_CHARS:
            self.add_error(
                f"{part}_file", f"The file is larger than {clientcerts.MAX_PEM_CHARS // 1024} KiB."
            )
            return None
        try:
            return upload.read().decode("ascii")
        except UnicodeDecodeError:
            self.add_error(f"{part}_file", "The file is not PEM text (a DER file? convert it with openssl).")
            return None
