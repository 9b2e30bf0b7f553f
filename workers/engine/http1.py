"""Reading an HTTP/1.1 response head: what the timed client needs from it."""

from __future__ import annotations


class ProtocolError(Exception):
    """The server's answer was not valid HTTP/1.1."""


class ConnectionClosed(ProtocolError):
    """The server closed the connection before the first byte of a response."""


_HEADS: dict[str, tuple[int, bool, dict[str, str]]] = {}  # a head's text -> what it says (read only)


def parse_head(text: str) -> tuple[int, bool, dict[str, str]]:
    """(status, keep-alive, headers with lower-case names) of a response head. A static page's head
    is the same text for a whole second (only ``Date`` moves): parsed once, looked up after."""
    found = _HEADS.get(text)
    if found is None:
        if len(_HEADS) >= 64:
            _HEADS.clear()
        found = _HEADS[text] = _parse_new_head(text)
    return found


def _parse_new_head(text: str) -> tuple[int, bool, dict[str, str]]:
    lines = text.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    try:
        status = int(rest[:3])
    except ValueError:
        raise ProtocolError(f"bad status line {lines[0][:80]!r}") from None
    if not version.startswith("HTTP/1."):
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return status, keep_alive, headers
