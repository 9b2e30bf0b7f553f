"""The demo target: a tiny WSGI site with pages of 1, 2 and 4 KB and an image, served by Gunicorn.

Like the seeds' test pages: fixed sizes, so arms are comparable and content length never varies.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable, Iterable

from portal.lib.demo.gunicorn_tls import tls_sessions

SIZES = {"/1k": 1024, "/2k": 2048, "/4k": 4096}
# The demo's Gunicorn workers rename themselves (the kernel's 15-character comm), so the run
# form's "Sample a local process" can watch the demo target's CPU by this name.
PROCESS_NAME = "tollgate-demo"


def _name_this_process() -> None:
    if os.environ.get("TOLLGATE_DEMO_TARGET_NAME") != PROCESS_NAME:
        return  # only in the processes the demo starts, never in whoever imports this module
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, PROCESS_NAME.encode(), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass  # not Linux: the demo works, only sampling it by name does not


_name_this_process()
_LINE = b"<p>Tollgate demo page: measure what TLS costs.</p>\n"


def _page(size: int) -> bytes:
    head = b"<!doctype html><title>demo</title>\n"
    body = head + _LINE * (size // len(_LINE) + 1)
    return body[:size]


def _png(width: int = 96, height: int = 96) -> bytes:
    """A real PNG (a gradient), made here so no binary file lives in the repository."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + bytes((x * 7 + y * 3) % 256 for x in range(width) for _ in range(3)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 1))
        + chunk(b"IEND", b"")
    )


PAGES = {path: _page(size) for path, size in SIZES.items()}
LOGO = _png()
INDEX = (
    b"<!doctype html><title>Tollgate demo target</title><h1>Tollgate demo target</h1><ul>"
    + b"".join(f'<li><a href="{p}">{p}</a> ({n} bytes)</li>'.encode() for p, n in SIZES.items())
    + b"</ul>"
)


def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
    path = environ.get("PATH_INFO", "/")
    if path in PAGES:
        status, ctype, body = "200 OK", "text/html; charset=utf-8", PAGES[path]
    elif path == "/logo.png":
        status, ctype, body = "200 OK", "image/png", LOGO
    elif path == "/":
        status, ctype, body = "200 OK", "text/html; charset=utf-8", INDEX
    elif path == "/tls-sessions":
        # What this worker's TLS side saw (portal/lib/demo/gunicorn_tls.py): proof of resumption.
        status, ctype, body = "200 OK", "application/json", json.dumps(tls_sessions()).encode()
    elif path == "/healthz":
        status, ctype, body = "200 OK", "text/plain", b"ok"
    elif path == "/.well-known/tollgate-verification.txt":
        token = os.environ.get("TOLLGATE_DEMO_VERIFICATION", "tollgate-demo")
        status, ctype, body = "200 OK", "text/plain", token.encode()
    else:
        status, ctype, body = "404 Not Found", "text/plain", b"not found"
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]
