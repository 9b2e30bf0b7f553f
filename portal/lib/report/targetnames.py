"""Target names a reader can tell apart. Pure functions.

A target is named by where it is: host, then the port and path when they are not the defaults
(``127.0.0.1:8443/1k``). Names a user typed may still collide; lists then add the part of the URL
that tells the targets apart (port, then path, then both URLs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def _host(parts) -> str:
    host = parts.hostname or ""
    return f"[{host}]" if ":" in host else host


def _port(parts) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def default_name(plain_url: str | None, tls_url: str | None, *, path: bool = True) -> str:
    """The host of the TLS URL (else the plain one), with its port unless it is the scheme's
    default and (``path``) its path unless it is ``/``."""
    url = tls_url or plain_url or ""
    parts = urlsplit(url)
    if not parts.hostname:
        return url
    port = _port(parts)
    name = _host(parts)
    if port and port != DEFAULT_PORTS.get(parts.scheme):
        name += f":{port}"
    if path and parts.path not in ("", "/"):
        name += parts.path
    return name


MAX_TITLE_PATHS = 4


def paths_title(paths: list) -> str:
    """A run's request paths as its title names them: up to four, all of them
    (``/1k, /2k, /4k, /logo.png``); more, how many and the first three (``6 paths: /1k, /2k, /4k, …``)."""
    names = [str(p["path"]) if isinstance(p, dict) else str(p) for p in paths]
    if len(names) <= MAX_TITLE_PATHS:
        return ", ".join(names)
    return f"{len(names)} paths: {', '.join(names[: MAX_TITLE_PATHS - 1])}, …"


def run_title(label: str, name: str, arm_urls: list[str], paths: list | None) -> str:
    """What a run is called where it is shown: its target's ``label`` (its ``name``, told apart from
    others of that name). A run given its own paths (sent to every arm's host in place of the URLs'
    path) is titled by them, and a target named by default after its URL then loses the URL's path,
    which the run did not request: ``127.0.0.1:8443 · /1k, /2k, /4k, /logo.png``, not ``…/1k``."""
    if not paths:
        return label
    plain = next((u for u in arm_urls if u and u.startswith("http:")), None)
    tls = next((u for u in arm_urls if u and u.startswith("https:")), None)
    base = label
    if name == default_name(plain, tls) and label.startswith(name):
        base = default_name(plain, tls, path=False) + label[len(name) :]
    return f"{base} · {paths_title(paths)}"


def _where(url: str | None, with_path: bool) -> str:
    parts = urlsplit(url or "")
    if not parts.hostname:
        return url or "—"
    port = _port(parts) or DEFAULT_PORTS.get(parts.scheme, "")
    return f"{_host(parts)}:{port}" + ((parts.path or "/") if with_path else "")


def _suffixes(plain_url: str | None, tls_url: str | None) -> list[str]:
    """What tells a target apart, shortest first: port, port and path, both URLs."""
    url = tls_url or plain_url
    both = " · ".join(
        f"{scheme} {_where(u, True)}" for scheme, u in (("https", tls_url), ("http", plain_url)) if u
    )
    return [_where(url, False), _where(url, True), both]


def display_names(targets: Iterable[tuple[Hashable, str, str | None, str | None]]) -> dict:
    """``{key: label}`` for ``(key, name, plain_url, tls_url)`` tuples: the name itself when it is
    unique among them, else the name with the shortest part of the URL that tells the targets of
    that name apart, e.g. ``shop (10.0.0.5:8443)`` beside ``shop (10.0.0.5:443)``."""
    by_name: dict[str, list[tuple]] = defaultdict(list)
    for key, name, plain_url, tls_url in targets:
        by_name[name].append((key, _suffixes(plain_url, tls_url)))
    labels = {}
    for name, group in by_name.items():
        if len(group) == 1:
            labels[group[0][0]] = name
            continue
        level = next(
            (i for i in range(3) if len({suffixes[i] for _, suffixes in group}) == len(group)),
            2,
        )
        for key, suffixes in group:
            labels[key] = f"{name} ({suffixes[level]})"
    return labels
