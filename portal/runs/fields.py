"""The run form's fields (``portal.runs.forms.RunForm`` is made of them):

* **RunSpec's**: label, help, bounds and initial value come from ``portal.lib.runs.runspec.RunSpec``, so
  the form, the API (which fills the same form) and the CLI agree. Text fields the form parses
  (``paths``, ``expected_status``, ``wan_rtt_ms``, ``generators``) take a typed value as well — the
  API's JSON list goes in as it is, never written out as text to be parsed again — and show one (a
  scenario's stored values) as the text a user would type.
* **The texts it parses**: request paths, headers and expected status codes. Each parser raises a
  ``ValidationError`` that names the line, so the form (and the CLI, which fills the same form) says
  what to fix.
* **The TLS matrix, WAN projection and saturation search**: their checks, and the saturation search's
  fields. ``tls_matrix`` goes to the engine (``EngineConfig.tls_matrix``: which dimensions ``tls_new``
  and ``h2_new`` are repeated under, ``portal.lib.tls.matrix``); ``wan_rtt_ms`` is portal-only
  (``portal.runs.configs``): the RTTs of the report's WAN projection (``portal.lib.stats.wan``). The
  ``saturation_*`` fields make ``EngineConfig.saturation`` (``portal.lib.stats.saturation``; issue 15): the
  capacity search after the arms.
"""

from __future__ import annotations

import re

from django import forms

from portal.lib.runs import runspec
from portal.lib.runs.protocol import ARMS
from portal.lib.runs.runspec import MAX_HEADERS_FIELD, Option  # noqa: F401 (the run form's headers field)
from portal.lib.stats import saturation, wan
from portal.lib.tls import matrix
from portal.validators import non_ascii


def as_text(value, separator: str = ",") -> str:
    """A typed value as the form's text: paths one per line with their weight, numbers comma-separated."""
    if isinstance(value, list):
        items = [
            f"{item.get('path', '')} {item.get('weight', 1):g}" if isinstance(item, dict) else as_text(item)
            for item in value
        ]
        return separator.join(items)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


class TypedTextInput(forms.TextInput):
    def format_value(self, value):
        return as_text(value) or None


class TypedTextarea(forms.Textarea):
    def format_value(self, value):
        return as_text(value, "\n") or None


class TypedTextField(forms.CharField):
    """A text the form's ``clean_<name>`` parses, or the typed value itself (a list, a number) as the
    API's JSON and a saved scenario give it."""

    def to_python(self, value):
        if isinstance(value, list | dict | int | float) and not isinstance(value, bool):
            return value
        return super().to_python(value)

    def run_validators(self, value) -> None:
        if isinstance(value, str):  # max_length counts typed characters
            super().run_validators(value)


def form_field(opt: Option) -> forms.Field:
    """The Django form field of one spec option."""
    common = {"label": opt.label, "help_text": opt.help, "required": opt.required}
    bounds = opt.bounds
    if opt.kind in ("int", "float"):
        number = forms.IntegerField if opt.kind == "int" else forms.FloatField
        return number(min_value=bounds.get("ge"), max_value=bounds.get("le"), initial=opt.default, **common)
    if opt.kind == "bool":
        return forms.BooleanField(**{**common, "required": False}, initial=opt.default)
    labels = opt.extra.get("labels") or {}
    if opt.kind == "choice":
        return forms.ChoiceField(choices=list(labels.items()), initial=opt.default, **common)
    if opt.kind == "choices":
        return forms.MultipleChoiceField(
            choices=list(labels.items()),
            widget=forms.CheckboxSelectMultiple,
            initial=list(opt.default),
            **{**common, "required": not opt.extra.get("optional")},
        )
    if opt.kind == "lines":
        attrs = {"rows": opt.extra.get("rows", 2), "placeholder": opt.extra.get("placeholder", "")}
        widget = TypedTextarea(attrs=attrs)
    else:
        widget = TypedTextInput()
    initial = as_text(opt.default) or None
    return TypedTextField(max_length=opt.extra.get("chars"), widget=widget, initial=initial, **common)


def form_fields(spec=runspec.RunSpec) -> dict[str, forms.Field]:
    """The form fields of every option the spec does not leave to a hand-written field, by form name."""
    return {opt.form_name: form_field(opt) for opt in runspec.options(spec).values() if opt.kind != "custom"}


SpecFields = type("SpecFields", (forms.Form,), form_fields())


# The client owns these: they define connection handling and framing, which the arms control.
RESERVED_HEADERS = {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "upgrade"}
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
STATUS_ITEM = re.compile(r"^([1-5])xx$|^([1-5][0-9][0-9])$")
# Sizes servers accept (nginx: 8 KiB per request line or header line by default), and what a form
# should hold; a megabyte header is a mistake, not a scenario.
MAX_PATH_CHARS = 4096
MAX_PATHS = 50
MAX_HEADER_VALUE_BYTES = 8 * 1024
MAX_HEADERS = 50


def _typed(value, what: str = "a list or a string"):
    """The form's text or the API's list, refused as a whole when it is neither."""
    if not isinstance(value, str | list):
        raise forms.ValidationError(f"Expected {what}.")
    return value


def _path_lines(value: str | list):
    """(line number, path, weight or its text) per path: the form's lines, or the API's list items
    (``{"path", "weight"}`` or ``"/path weight"``), numbered from 1 alike."""
    for number, item in enumerate(value.splitlines() if isinstance(value, str) else value, 1):
        if isinstance(item, dict):
            path, weight = item.get("path"), item.get("weight", 1)
            if not isinstance(path, str) or isinstance(weight, bool) or not isinstance(weight, int | float):
                raise forms.ValidationError("Malformed entries.")
            yield number, path.strip(), weight
            continue
        if not isinstance(item, str):
            item = str(item)
        line = item.strip()
        if not line or line.startswith("#"):
            continue
        path, _, weight_text = line.partition(" ")
        yield number, path, weight_text.strip()


def parse_paths(value: str | list) -> list[dict]:
    """``/path [weight]`` per line (or the API's list of them) → [{"path", "weight"}]; blank lines and
    ``#`` comments skipped."""
    out = []
    for number, path, weight_text in _path_lines(_typed(value)):
        if not path.startswith("/"):
            raise forms.ValidationError(f"Line {number}: a path must start with / (got {path!r}).")
        bad = non_ascii(path)
        if bad:
            raise forms.ValidationError(
                f"Line {number}: the path has a control or non-ASCII character ({bad}); percent-encode it "
                "(é is %C3%A9)."
            )
        if "#" in path:
            raise forms.ValidationError(f"Line {number}: a # starts a fragment, never sent; remove it.")
        if len(path) > MAX_PATH_CHARS:
            raise forms.ValidationError(f"Line {number}: a path of at most {MAX_PATH_CHARS} characters.")
        try:
            weight = float(weight_text) if weight_text != "" else 1.0
        except ValueError:
            message = f"Line {number}: the weight {weight_text!r} is not a number."
            raise forms.ValidationError(message) from None
        if not 0 < weight <= 1000:
            raise forms.ValidationError(f"Line {number}: the weight must be above 0 and at most 1000.")
        out.append({"path": path, "weight": weight})
    if len(out) > MAX_PATHS:
        raise forms.ValidationError(f"At most {MAX_PATHS} paths.")
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
        out[name] = check_header_value(number, name, value)
    if len(out) > MAX_HEADERS:
        raise forms.ValidationError(f"At most {MAX_HEADERS} headers.")
    return out


def check_header_value(number: int, name: str, value: str) -> str:
    """Visible ASCII, spaces and tabs only: what HTTP/1.1 (RFC 9110) recommends for field values.
    Its obs-text (bytes 0x80-0xFF) is refused too: which bytes a typed "é" should become (Latin-1 or
    UTF-8) is the server's guess, and a guess is not a measurement."""
    for ch in value:
        if not (32 <= ord(ch) < 127 or ch == "\t"):
            shown = ch if ch.isprintable() else repr(ch)
            raise forms.ValidationError(
                f"Line {number}: the value of {name} has a control or non-ASCII character ({shown}); "
                "header values are ASCII (encode it the way the server expects, e.g. percent or base64)."
            )
    if len(value) > MAX_HEADER_VALUE_BYTES:
        raise forms.ValidationError(
            f"Line {number}: the value of {name} is {len(value)} bytes; at most {MAX_HEADER_VALUE_BYTES}."
        )
    return value


def parse_status(value: str | list) -> list[int]:
    """``200, 204, 3xx`` (or the API's list of them) → sorted codes; empty → [] (meaning any 2xx)."""
    codes: set[int] = set()
    value = _typed(value)
    items = re.split(r"[,\s]+", value.strip()) if isinstance(value, str) else [str(i).strip() for i in value]
    for item in items:
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


SATURATION_FIELDS = (
    "saturation_arms",
    "saturation_mode",
    "saturation_start",
    "saturation_max",
    "saturation_stage_s",
)


class TuningFields(forms.Form):
    saturation_arms = forms.MultipleChoiceField(
        label="Saturation search",
        required=False,
        choices=[(arm, arm) for arm in ARMS],
        widget=forms.CheckboxSelectMultiple,
        help_text="After the run's arms, each ticked arm (it must be among the arms) runs again in stages of "
        "rising load — coarse steps × 2, then smaller ones around the knee — until throughput stops "
        "rising, latency knees or errors appear. A saturated generator is reported as the limit, never "
        "as the server's. The report's capacity chart: tick plain and tls_new for the capacity cost of TLS.",
    )
    saturation_mode = forms.ChoiceField(
        label="Search by",
        required=False,
        initial="users",
        choices=[("users", "users (closed loop)"), ("rate", "arrival rate, req/s (open loop)")],
    )
    saturation_start = forms.FloatField(
        label="Start load",
        required=False,
        min_value=0.001,
        help_text="Users or req/s; blank: 1 user / 1 req/s.",
    )
    saturation_max = forms.FloatField(
        label="Maximum load",
        required=False,
        min_value=0.001,
        help_text=f"Users or req/s; blank: {saturation.DEFAULTS['max']}. Held to the project's limits.",
    )
    saturation_stage_s = forms.FloatField(
        label="Seconds per stage",
        required=False,
        min_value=saturation.MIN_STAGE_S,
        max_value=saturation.MAX_STAGE_S,
        help_text=f"Measured window of each stage (plus {saturation.DEFAULTS['warmup_s']:g} s warm-up); "
        f"blank: {saturation.DEFAULTS['stage_s']:g}.",
    )

    def _listed(self, field: str, parse) -> list:
        """A list field given as a list (API) or as comma-separated text (form, CLI), parsed."""
        value = self.cleaned_data.get(field) or ""
        if not isinstance(value, str | list):
            raise forms.ValidationError("Expected a list or a string.")
        try:
            return parse(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_wan_rtt_ms(self) -> list[float]:
        return self._listed("wan_rtt_ms", wan.parse_rtts)

    def clean_tls_groups(self) -> list[str]:
        return self._listed("tls_groups", matrix.parse_groups)

    def clean_generators(self) -> int:
        """A number of processes, or "auto" (stored as 0: one per core of each generator host)."""
        try:
            value = self.cleaned_data.get("generators")
            if isinstance(value, int):  # typed (the API, a saved scenario): 0 is auto as stored
                return value if value == 0 else runspec.parse_generators(value)
            return runspec.parse_generators(value or "1")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_tuning(self, data: dict) -> None:
        """The matrix repeats tls_new or h2_new: without either there is nothing to repeat. The
        saturation search's settings, checked (``portal.lib.stats.saturation.normalise``), become
        ``data["saturation"]``."""
        if data.get("tls_matrix") and matrix.needs_arm_error(data.get("arms") or []):
            self.add_error(
                "tls_matrix",
                "The TLS matrix repeats the tls_new arm (and h2_new, for HTTP/2): add tls_new or h2_new to "
                'the arms (tick it, or list it in --arms / "arms").',
            )
        if data.get("tls_matrix") and data.get("generators", 1) != 1:
            self.add_error("generators", "The TLS matrix runs with one generator process (1).")
        data["saturation"] = None
        if data.get("saturation_arms"):
            wanted = {"arms": data["saturation_arms"], "mode": data.get("saturation_mode") or "users"}
            for key in ("start", "max", "stage_s"):
                if data.get(f"saturation_{key}") is not None:
                    wanted[key] = data[f"saturation_{key}"]
            try:
                data["saturation"] = saturation.normalise(wanted, list(data.get("arms") or []))
            except ValueError as exc:
                self.add_error("saturation_arms", str(exc).removeprefix("saturation: ").capitalize() + ".")

    def tuning_config(self) -> dict:
        data = self.cleaned_data
        return {
            "tls_matrix": matrix.parse_dimensions(data.get("tls_matrix") or []),
            "tls_groups": data.get("tls_groups") or [],
            "wan_rtt_ms": data.get("wan_rtt_ms") or list(wan.DEFAULT_RTTS_MS),
            "generators": data.get("generators", 1),
            "saturation": data.get("saturation"),
        }
