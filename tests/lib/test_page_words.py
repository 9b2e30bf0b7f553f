"""Metric names in words, target names a reader can tell apart, and whose CPU the projection uses."""

from __future__ import annotations

import pytest

from portal.lib.report import metrics, targetnames
from portal.lib.stats import projection


@pytest.mark.parametrize(
    ("metric", "label"),
    [
        ("ttlb_p50_us", "time to last byte, median (ms)"),
        ("ttlb_p95_us", "time to last byte, p95 (ms)"),
        ("ttfb_p50_us", "time to first byte, median (ms)"),
        ("tls_handshake_p50_us", "TLS handshake, median (ms)"),
        ("connect_p99_us", "TCP connect, p99 (ms)"),
        ("rps", "throughput (req/s)"),
        ("server_cpu_ms_per_req", "server CPU per request (CPU-ms)"),
        ("something_new", "something_new"),
    ],
)
def test_metric_labels_in_words_with_the_shown_unit(metric, label):
    assert metrics.label(metric) == label


def test_values_and_intervals_carry_the_unit_of_their_metric():
    assert metrics.with_unit(1234, "ttlb_p50_us") == "1.23 ms"
    assert metrics.with_unit(-52, "rps", signed=True) == "-52.0 req/s"
    assert metrics.with_unit(0.6, "server_cpu_ms_per_req", signed=True) == "+0.6000 CPU-ms"
    assert metrics.interval([70, 90], "ttlb_p50_us") == "+0.07 … +0.09 ms"
    assert metrics.interval([-3.5, 1.25], "rps") == "-3.5 … +1.2 req/s"
    assert metrics.interval(None, "rps") == "—"


@pytest.mark.parametrize(
    ("plain", "tls", "name"),
    [
        ("http://127.0.0.1:8081/1k", "https://127.0.0.1:8443/1k", "127.0.0.1:8443/1k"),
        ("http://shop.example/", "https://shop.example/", "shop.example"),
        ("http://shop.example:8080/api", "", "shop.example:8080/api"),
        ("", "https://[::1]:8443/", "[::1]:8443"),
    ],
)
def test_default_names_carry_a_port_or_path_that_is_not_the_default(plain, tls, name):
    assert targetnames.default_name(plain, tls) == name


def test_colliding_names_get_the_shortest_part_of_the_url_that_tells_them_apart():
    labels = targetnames.display_names(
        [
            (1, "shop", "http://10.0.0.5/", "https://10.0.0.5/"),
            (2, "shop", "http://10.0.0.5:8080/", "https://10.0.0.5:8443/"),
            (3, "api", "", "https://10.0.0.5/v1"),
            (4, "api", "", "https://10.0.0.5/v2"),
            (5, "cdn", "http://10.0.0.9/", "https://10.0.0.9/"),
            (6, "cdn", "http://10.0.0.10/", "https://10.0.0.9/"),
            (7, "alone", "http://10.0.0.7/", ""),
        ]
    )
    assert labels[1] == "shop (10.0.0.5:443)" and labels[2] == "shop (10.0.0.5:8443)"
    assert labels[3] == "api (10.0.0.5:443/v1)" and labels[4] == "api (10.0.0.5:443/v2)"
    assert labels[5] == "cdn (https 10.0.0.9:443/ · http 10.0.0.9:80/)"
    assert labels[6] == "cdn (https 10.0.0.9:443/ · http 10.0.0.10:80/)"
    assert labels[7] == "alone"
    assert len(set(labels.values())) == len(labels)


URLS = ["http://127.0.0.1:8081/1k", "https://127.0.0.1:8443/1k"]
FOUR = [{"path": p, "weight": 1} for p in ("/1k", "/2k", "/4k", "/logo.png")]


@pytest.mark.parametrize(
    ("label", "name", "paths", "title"),
    [
        # A run on the URLs' own path: its target's label, as before.
        ("127.0.0.1:8443/1k", "127.0.0.1:8443/1k", [], "127.0.0.1:8443/1k"),
        # Its own paths: all of them, and a name made from the URL loses the path it did not request.
        ("127.0.0.1:8443/1k", "127.0.0.1:8443/1k", FOUR, "127.0.0.1:8443 · /1k, /2k, /4k, /logo.png"),
        ("127.0.0.1:8443/1k", "127.0.0.1:8443/1k", FOUR[1:2], "127.0.0.1:8443 · /2k"),
        # More than four: how many, and the first three.
        (
            "shop",
            "shop",
            FOUR + [{"path": "/a", "weight": 2}, {"path": "/b", "weight": 1}],
            "shop · 6 paths: /1k, /2k, /4k, …",
        ),
        # A name the user typed is kept, with what tells it apart from another of that name.
        ("shop (127.0.0.1:8443)", "shop", FOUR, "shop (127.0.0.1:8443) · /1k, /2k, /4k, /logo.png"),
        (
            "127.0.0.1:8443/1k (127.0.0.1:8443)",
            "127.0.0.1:8443/1k",
            FOUR[:2],
            "127.0.0.1:8443 (127.0.0.1:8443) · /1k, /2k",
        ),
    ],
)
def test_a_mixed_path_run_is_titled_by_its_paths_not_the_first_one(label, name, paths, title):
    assert targetnames.run_title(label, name, URLS, paths) == title


def test_projection_uses_the_local_process_when_no_server_probe_sampled_the_arms():
    local = {"plain": 0.02, "tls": 0.03, "plain_new": 0.05, "tls_new": 0.65}
    probes = {
        "server_cpu": {},
        "generator_cpu": {
            name: {"cpu_ms_per_req": v, "process": "tollgate-demo"} for name, v in local.items()
        },
    }
    arms = {name: {"server_cpu_ms_per_req": None} for name in local}
    p = projection.projection_inputs(arms, probes)
    assert p["source"] == "local_process" and p["process"] == "tollgate-demo"
    assert p["keepalive_ms_per_req"] == 0.01 and p["new_ms_per_req"] == 0.6 and p["new_base"] == "plain_new"
    assert p["cpu_ms_per_req"] == {"plain": 0.02, "tls": 0.03, "plain_new": 0.05, "tls_new": 0.65}
    # A server probe of the same arms wins: it measures the server itself.
    server = {name: {"server_cpu_ms_per_req": v * 2} for name, v in local.items()}
    probes["server_cpu"] = {"tls": {"process": "nginx"}}
    p = projection.projection_inputs(server, probes)
    assert p["source"] == "server_probe" and p["process"] == "nginx" and p["keepalive_ms_per_req"] == 0.02
    assert projection.projection_inputs(arms, {}) is None
