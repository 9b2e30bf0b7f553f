"""bench/h2_libcurl.py claims an HTTP/2 figure only for what it measured over HTTP/2: a server that
answers HTTP/1.1 over ALPN, or none at all, makes it exit 1 with what it saw."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def probe(url: str, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [sys.executable, "-m", "bench.h2_libcurl", url, "--warmup", "0.2", "--duration", "0.5", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    lines = proc.stdout.strip().splitlines()
    assert [json.loads(line) for line in lines[:2]] == [{"window": "start"}, {"window": "end"}], proc.stderr
    return proc.returncode, json.loads(lines[-1])


@pytest.fixture(scope="module")
def nginx_h1():
    from bench.nginx import Nginx, find_binary

    if not find_binary():
        pytest.skip("needs nginx")
    with Nginx(worker_processes=1, http2=False) as nginx:
        yield nginx


@pytest.mark.parametrize("loop", ["hub", "curl"])
def test_an_http11_answer_is_no_http2_figure(nginx_h1, loop):
    code, figures = probe(nginx_h1.tls_url("/1k"), "--loop", loop, "--users", "2")
    assert figures["requests"] > 0 and figures["failures"] == 0
    assert figures["http_versions"] == ["1.1"] and code == 1


@pytest.mark.parametrize("loop", ["hub", "curl"])
def test_a_closed_port_is_failures_with_libcurls_reason(loop):
    from bench.nginx import free_port

    code, figures = probe(f"https://127.0.0.1:{free_port()}/", "--loop", loop, "--users", "1")
    assert code == 1 and figures["requests"] == 0 and figures["failures"] > 0
    assert figures["per_cpu_s"] is None and figures["ttfb_p50_us"] is None
    assert any("libcurl error 7" in error for error in figures["errors"]), figures["errors"]
