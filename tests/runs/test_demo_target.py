"""The demo target on real Gunicorn, over HTTP and HTTPS: fixed-size pages and a real PNG."""

from __future__ import annotations

import os
import ssl
import struct
import urllib.request
import zlib
from pathlib import Path

from portal.lib.demo_target import PROCESS_NAME
from portal.runs.demo import start_demo_target, stop_processes
from tests.servers import closed_port


def fetch(url: str) -> tuple[int, str, bytes]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, context=context, timeout=5) as response:  # noqa: S310 - loopback
        return response.status, response.headers["Content-Type"], response.read()


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, …), from /proc."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue  # the task ended meanwhile
            found.extend(children)
            todo.extend(children)
    return found


def comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def test_demo_target_serves_pages_and_an_image_over_http_and_https(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    plain_port, tls_port = closed_port(), closed_port()
    procs = start_demo_target(tmp_path, plain_port=plain_port, tls_port=tls_port)
    try:
        for base in (f"http://127.0.0.1:{plain_port}", f"https://127.0.0.1:{tls_port}"):
            for path, size in (("/1k", 1024), ("/2k", 2048), ("/4k", 4096)):
                status, ctype, body = fetch(base + path)
                assert (status, len(body)) == (200, size) and ctype.startswith("text/html")
            status, ctype, png = fetch(base + "/logo.png")
            assert status == 200 and ctype == "image/png"
            # A real PNG: signature, a 96×96 RGB header, and image data that inflates to 96 rows.
            assert png[:8] == b"\x89PNG\r\n\x1a\n"
            width, height, depth, color = struct.unpack(">IIBB", png[16:26])
            assert (width, height, depth, color) == (96, 96, 8, 2)
            idat_len = struct.unpack(">I", png[33:37])[0]
            assert len(zlib.decompress(png[41 : 41 + idat_len])) == 96 * (1 + 96 * 3)
        # The workers carry the demo's process name, so the local probe can sample them by it.
        # Only the processes this test started count: another demo on the machine must not.
        ours = [pid for proc in procs for pid in descendants(proc.pid)]
        named = [pid for pid in ours if comm(pid) == PROCESS_NAME]
        assert len(named) == 2, (named, ours)  # one worker per port
        assert Path(f"/proc/{os.getpid()}/comm").read_text().strip() != PROCESS_NAME  # importers keep theirs
    finally:
        stop_processes(procs)
