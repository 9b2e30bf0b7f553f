"""Number formatting for reports: values are stored in µs, shown in ms with 2 decimals."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def ms(value_us) -> str:
    if value_us is None or value_us == "":
        return "—"
    return f"{value_us / 1000:.2f}"


@register.filter
def signed_ms(value_us) -> str:
    if value_us is None:
        return "—"
    return f"{value_us / 1000:+.2f}"


@register.filter
def signed_pct(value) -> str:
    if value is None:
        return "—"
    return f"{value:+.1f}%"


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None
