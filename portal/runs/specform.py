"""The run form's fields derived from ``portal.lib.runs.runspec.RunSpec``: label, help, bounds and initial
value come from the spec, so the form, the API (which fills the same form) and the CLI agree.

Text fields the form parses (``paths``, ``expected_status``, ``wan_rtt_ms``, ``generators``) take a
typed value as well — the API's JSON list goes in as it is, never written out as text to be parsed
again — and show one (a scenario's stored values) as the text a user would type.
"""

from __future__ import annotations

from django import forms

from portal.lib.runs import runspec
from portal.lib.runs.runspec import Option


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
