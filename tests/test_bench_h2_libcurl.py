"""bench/h2_libcurl.py claims an HTTP/2 figure only for what it measured over HTTP/2: over HTTP/2 it
counts answered requests with their times, while a server that answers HTTP/1.1 over ALPN, or none at
all, makes it exit 1 with what it saw."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - this interpreter, our own probe
        [sys.executable, "-m", "bench.h2_libcurl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def probe(url: str, *args: str) -> tuple[int, dict]:
    proc = run_probe(url, "--warmup", "0.2", "--duration", "0.5", *args)
    lines = proc.stdout.strip().splitlines()
    assert [json.loads(line) for line in lines[:2]] == [{"window": "start"}, {"window": "end"}], proc.stderr
    return proc.returncode, json.loads(lines[-1])


def nginx(http2: bool):
    from bench.nginx import Nginx, find_binary

    if not find_binary():
        pytest.skip("needs nginx")
    return Nginx(worker_processes=1, http2=http2, access_log_format="$server_protocol $status")


@pytest.fixture(scope="module")
def nginx_h1():
    with nginx(http2=False) as server:
        yield server


@pytest.fixture(scope="module")
def nginx_h2():
    with nginx(http2=True) as server:
        yield server


@pytest.mark.parametrize("loop", ["hub", "curl"])
def test_over_http2_it_counts_the_answers_of_the_window_with_their_times(nginx_h2, loop):
    before = len(nginx_h2.access_log_lines())
    code, figures = probe(nginx_h2.tls_url("/1k"), "--loop", loop, "--users", "2")
    assert code == 0 and figures["http_versions"] == ["2"] and figures["failures"] == 0
    # The window's requests, and more were answered (the warm-up's): nginx logged each one.
    logged = nginx_h2.access_log_lines()[before:]
    assert 0 < figures["requests"] < len(logged) and set(logged) == {"HTTP/2.0 200"}
    assert 0 < figures["ttfb_p50_us"] <= figures["ttlb_p50_us"]
    assert figures["per_cpu_s"] == pytest.approx(figures["requests"] / figures["cpu_s"], rel=0.01)
    assert figures["cpu_s"] == pytest.approx(figures["user_s"] + figures["system_s"], abs=0.002)


@pytest.mark.parametrize("loop", ["hub", "curl"])
def test_an_http11_answer_is_no_http2_figure(nginx_h1, loop):
    code, figures = probe(nginx_h1.tls_url("/1k"), "--loop", loop, "--users", "2")
    assert figures["requests"] > 0 and figures["failures"] == 0
    assert figures["http_versions"] == ["1.1"] and code == 1


@pytest.mark.parametrize("loop", ["hub", "curl"])
def test_a_closed_port_is_failures_with_libcurls_reason(loop):
    from bench.nginx import free_port

    code, figures = probe(f"https://127.0.0.1:{free_port()}/", "--loop", loop, "--users", "1")
    # Each attempt in the window is a request that failed, as the engine counts them; none answered.
    assert code == 1 and figures["requests"] == figures["failures"] > 0
    assert figures["ttfb_p50_us"] is None and figures["ttlb_p50_us"] is None
    assert any("libcurl error 7" in error for error in figures["errors"]), figures["errors"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["http://127.0.0.1:1/"], "an https:// URL on 127.0.0.0/8 or ::1 only"),
        (["https://192.0.2.1/"], "an https:// URL on 127.0.0.0/8 or ::1 only"),
        (["https://example.com/"], "an https:// URL on 127.0.0.0/8 or ::1 only"),
        (["https://127.0.0.1:1/", "--users", "0"], "argument --users: 0 is outside 1-1000"),
        (["https://127.0.0.1:1/", "--duration", "soon"], "argument --duration: 'soon' is not a number"),
    ],
)
def test_bad_arguments_are_refused_with_the_reason_before_any_load(args, said):
    proc = run_probe(*args)
    assert proc.returncode == 2 and said in proc.stderr and proc.stdout == ""
