"""Shared by the signing tests: every number of a report, changed one digit at a time."""

from __future__ import annotations

from collections.abc import Iterator


def number_paths(node, path: tuple = ()) -> Iterator[tuple]:
    """The path (keys and indices) of every number in a JSON document (booleans are not numbers)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from number_paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from number_paths(value, (*path, index))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield path


def one_digit_changed(value: int | float) -> int | float:
    """``value`` with its last digit changed by one (12 → 13, 0.29 → 0.28, 1e-05 → 2e-05)."""
    text = repr(value)
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    mantissa_end = text.find("e") if "e" in text else len(text)
    last = max(i for i in digits if i < mantissa_end)
    new_digit = "8" if text[last] == "9" else str(int(text[last]) + 1)
    changed = type(value)(text[:last] + new_digit + text[last + 1 :])
    assert changed != value
    return changed


def get_at(document, path: tuple):
    for part in path:
        document = document[part]
    return document


def set_at(document, path: tuple, value) -> None:
    get_at(document, path[:-1])[path[-1]] = value
