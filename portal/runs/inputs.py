"""The run form's text fields parsed: request paths, headers and expected status codes.

Each parser raises a ``ValidationError`` that names the line, so the form (and the CLI, which fills
the same form) says what to fix.
"""

from __future__ import annotations

import re

from django import forms

from portal.lib.runs.runspec import MAX_HEADERS_FIELD  # noqa: F401 (the run form's headers field)
from portal.validators import non_ascii

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
