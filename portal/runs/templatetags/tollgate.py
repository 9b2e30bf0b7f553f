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


@register.filter
def pretty_json(value) -> str:
    import json

    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def split(value: str) -> list[str]:
    return value.split()


@register.filter
def cost(costs, name: str):
    """The entry named ``name`` of a list of costs (a run summary's), or None."""
    return next((c for c in costs or [] if c.get("name") == name), None)


@register.filter
def ms3(value_us) -> str:
    """ms with µs precision."""
    if value_us is None or value_us == "":
        return "—"
    return f"{value_us / 1000:.3f}"


@register.filter
def index(sequence, i: int):
    try:
        return sequence[i]
    except (IndexError, TypeError, KeyError):
        return None
