"""bench/generator runs end to end in a tiny mode and prints its figures as the last line, both TLS
libraries' in one run (``--tls-library both``)."""

from __future__ import annotations

import shutil

import pytest

from bench import bound
from portal.lib.stats import hostcapacity
from tests.conftest import bench_report, bench_run


def test_bench_generator_tiny_run_prints_the_ratios_of_both_tls_libraries():
    from bench.nginx import find_binary
    from portal.lib.demo.caddy import find_binary as find_caddy

    tools = ("wrk", "openssl", "h2load")
    if not (find_binary() and find_caddy() and all(shutil.which(tool) for tool in tools)):
        pytest.skip("needs nginx, caddy, wrk, openssl and h2load")
    # The TLS arms and the overhead part run twice (once per library): about 10 s more than one library.
    args = ("--duration", "1", "--warmup", "0.2", "--users", "2", "--tls-library", "both")
    report = bench_report("generator", *args, timeout=180)
    keys = (
        "keepalive_plain_vs_wrk",
        "keepalive_tls_vs_wrk",
        "handshakes_vs_s_time",
        "h2_vs_h2load",
        "scaling_2",
    )
    for key in keys:
        assert report[key] > 0, key
    assert report["engine"]["plain"]["requests"] > 0 and report["wrk"]["plain"]["requests"] > 0
    assert report["s_time"]["connections"] > 0 and report["h2load"]["requests"] > 0
    assert report["engine"]["h2"]["requests"] > 0
    assert set(report["overhead"]) == {"tls_library", "plain_new", "tls_new", "within_bound"}
    # What `manage.py tollgate record-bench` keeps of it for the operators' page (docs/operations.md).
    figures = hostcapacity.bench_figures(report)
    assert all(figures[arm] > 0 for arm in ("plain", "tls", "tls_new")) and figures["cores"] >= 1
    # Both TLS libraries' figures, in one run.
    assert report["settings"]["tls_libraries"] == ["system", "bundled"]
    by_library = report["by_library"]
    assert list(by_library) == ["system", "bundled"]
    # The engine ran on the library asked for, as its own hello says (the OpenSSL differs: 3.x vs 4.x).
    assert by_library["system"]["tls_library"]["binding"] == "ssl"
    assert by_library["bundled"]["tls_library"]["binding"].startswith("pyOpenSSL ")
    assert by_library["system"]["tls_library"]["openssl"] != by_library["bundled"]["tls_library"]["openssl"]
    for library, row in by_library.items():
        assert row["keepalive_tls_vs_wrk"] > 0 and row["handshakes_vs_s_time"] > 0, library
        assert row["engine"]["tls_new"]["requests"] > 0 and row["engine"]["tls"]["failures"] == 0, library
        assert row["overhead"]["tls_library"] == library
        for phase in ("connect_us", "ttlb_us"):
            assert row["overhead"]["tls_new"]["blocking"][phase] > 0
            assert row["overhead"]["tls_new"][phase]["within_bound"] in (True, False, None)
    # The overhead's verdict over the libraries is the report's own.
    assert report["within_bound"] == bound.overall(
        row["overhead"]["within_bound"] for row in by_library.values()
    )
    # The top-level figures are the first library's.
    assert report["keepalive_tls_vs_wrk"] == by_library["system"]["keepalive_tls_vs_wrk"]
    assert report["overhead"] == by_library["system"]["overhead"]
    # Each target judged from its own ratio, per TLS library where the ratio is per library.
    targets, met = report["targets"], report["met"]
    assert (targets["keepalive"], targets["handshakes"], targets["h2"]) == (0.70, 1.0, 0.20)
    assert met["keepalive_plain"] == (report["keepalive_plain_vs_wrk"] >= targets["keepalive"])
    assert met["h2"] == (report["h2_vs_h2load"] >= targets["h2"])
    for library, row in by_library.items():
        assert met["keepalive_tls"][library] == (row["keepalive_tls_vs_wrk"] >= targets["keepalive"])
        assert met["handshakes"][library] == (row["handshakes_vs_s_time"] >= targets["handshakes"])
    # What explains a ratio on another machine: nginx's sleeps per request under each tool (read from
    # its worker's /proc: at least 0, a number for every tool) and the machine's plain-Python speed.
    sleeps = [report["engine"][arm]["server_sleeps_per_req"] for arm in ("plain", "tls", "h2")]
    sleeps += [report["wrk"][arm]["server_sleeps_per_req"] for arm in ("plain", "tls")]
    sleeps.append(report["h2load"]["server_sleeps_per_req"])
    assert all(isinstance(value, float | int) and value >= 0 for value in sleeps), sleeps
    assert report["machine"]["python_ns_per_op"] > 0
    # The single-loop Python floor on the plain URL, beside wrk and the engine in the same run.
    # The floor twice: appending a tuple, then recording each answer as the engine does.
    for key, engine_record in (("loop_floor", False), ("loop_floor_recorded", True)):
        floor = report["machine"][key]
        assert floor["engine_record"] is engine_record
        assert floor["requests"] > 0 and floor["failures"] == 0 and floor["user_us_per_req"] > 0
        assert floor["vs_wrk"] == round(floor["per_cpu_s"] / report["wrk"]["plain"]["per_cpu_s"], 3)
        plain_per_cpu_s = report["engine"]["plain"]["per_cpu_s"]
        assert floor["engine_vs_floor"] == round(plain_per_cpu_s / floor["per_cpu_s"], 3)
    # HTTP/3 in the same run, on Caddy: the engine's requests and new connections per CPU-second beside
    # its own HTTP/2 there (no reference tool speaks HTTP/3 here), each ratio judged against the target.
    h3 = report["h3"]
    assert h3["reference"] is None and h3["server"] == "caddy"
    for arm in ("h2", "h3", "h2_new", "h3_new"):
        assert h3[arm]["requests"] > 0 and h3[arm]["failures"] == 0 and h3[arm]["per_cpu_s"] > 0, arm
    assert report["h3_vs_h2"] == h3["h3_vs_h2"] == round(h3["h3"]["per_cpu_s"] / h3["h2"]["per_cpu_s"], 3)
    assert report["h3_new_vs_h2_new"] == round(h3["h3_new"]["per_cpu_s"] / h3["h2_new"]["per_cpu_s"], 3)
    # A new connection per request on the _new arms.
    for arm in ("h2_new", "h3_new"):
        assert h3[arm]["connections_opened"] >= h3[arm]["requests"], arm
    assert targets["h3"] == 0.5
    assert met["h3"] == (report["h3_vs_h2"] >= 0.5) and met["h3_new"] == (report["h3_new_vs_h2_new"] >= 0.5)
    ratios = report["library_ratios"]
    system, bundled = (by_library[name]["engine"]["tls_new"]["per_cpu_s"] for name in ("system", "bundled"))
    assert ratios["tls_new_per_cpu_s"] == round(bundled / system, 3)
    assert all(value > 0 for value in ratios.values())


def test_bench_generator_only_h2_repeats_the_engine_and_h2load_in_turn():
    """``--only h2``: the engine's h2 arm then h2load, ``--repeat`` times on one nginx, each run with
    both tools' requests per CPU-second, CPU µs per request and their ratio; the median of the runs."""
    from bench.nginx import find_binary

    if not (find_binary() and shutil.which("h2load")):
        pytest.skip("needs nginx and h2load")
    args = ("--only", "h2", "--repeat", "2", "--duration", "1", "--warmup", "0.2", "--users", "2")
    report = bench_report("generator", *args, timeout=120)
    runs = report["h2_runs"]
    assert len(runs) == 2 and report["settings"]["tls_libraries"] == ["system"]
    for run in runs:
        engine, h2load = run["engine"]["system"], run["h2load"]
        assert engine["requests"] > 0 and engine["failures"] == 0 and h2load["requests"] > 0
        for figures in (engine, h2load):
            assert figures["cpu_us_per_request"] == round(1e6 / figures["per_cpu_s"], 1)
        assert run["h2_vs_h2load"]["system"] == round(engine["per_cpu_s"] / h2load["per_cpu_s"], 3)
        assert engine["server_sleeps_per_req"] >= 0 and h2load["server_sleeps_per_req"] >= 0
        # The compiled client beside the engine, in both shapes, on HTTP/2, with nginx's sleeps.
        assert set(run["libcurl"]) == {"hub", "curl"}
        for loop, probe in run["libcurl"].items():
            assert probe["requests"] > 0 and probe["failures"] == 0 and probe["http_versions"] == ["2"], loop
            assert probe["cpu_us_per_request"] == round(1e6 / probe["per_cpu_s"], 1)
            assert 0 < probe["ttfb_p50_us"] <= probe["ttlb_p50_us"] and probe["server_sleeps_per_req"] >= 0
            assert run["libcurl_vs_h2load"][loop] == round(probe["per_cpu_s"] / h2load["per_cpu_s"], 3)
    ratios = sorted(run["h2_vs_h2load"]["system"] for run in runs)
    median = report["h2_vs_h2load_median"]["system"]
    assert median == round((ratios[0] + ratios[1]) / 2, 3)
    assert report["target"] == 0.20 and report["met"] == {"system": median >= 0.20}
    for loop, median in report["libcurl_vs_h2load_median"].items():
        pair = [run["libcurl_vs_h2load"][loop] for run in runs]
        assert median == round(sum(pair) / 2, 3)
    assert report["machine"]["python_ns_per_op"] > 0


def test_bench_generator_overhead_takes_turns_and_its_check_exits_with_the_verdict():
    """--only overhead --check: the engine and the blocking client take turns over the engine's window
    on both libraries; each phase carries its medians, interval and verdict, and the exit code is the
    verdict's (0 within, 3 over, 4 not judged: which one depends on this machine's noise, so the test
    holds the code to the printed verdict, not to a value)."""
    from bench.nginx import find_binary

    if not find_binary():
        pytest.skip("needs nginx")
    args = ("--only", "overhead", "--duration", "1", "--warmup", "0.3", "--tls-library", "both", "--check")
    proc, report = bench_run("generator", *args, timeout=180)
    assert proc.returncode == bound.exit_code(report["within_bound"]), proc.stderr[-1500:]
    assert bound.verdict_line("engine overhead", report["within_bound"]) in proc.stdout
    runs = report["overhead_runs"]
    assert [run["tls_library"] for run in runs] == ["system", "bundled"]
    for run in runs:
        for arm in ("plain_new", "tls_new"):
            row = run[arm]
            # Both clients measured, the reference inside the engine's window only.
            assert row["engine_requests"] > 0 and row["blocking_requests"] > 0, (run["tls_library"], arm)
            for phase in ("connect_us", "ttlb_us"):
                judged = row[phase]
                assert judged["allowed_us"] == round(bound.allowance_us(row["blocking"][phase]), 1)
                assert judged["extra_us"] == round(row["engine"][phase] - row["blocking"][phase], 1)
                if judged["extra_ci95_us"] is None:
                    assert judged["within_bound"] is None
                else:
                    best, worst = judged["extra_ci95_us"]
                    assert judged["within_bound"] == bound.verdict(worst, best, judged["allowed_us"])
            assert row["within_bound"] == bound.overall(
                row[phase]["within_bound"] for phase in ("connect_us", "ttlb_us")
            )
    for library in ("system", "bundled"):
        summary = report["summary"][library]
        assert sum(summary["tls_new"]["ttlb_us"]["runs"].values()) == 1
    assert report["within_bound"] == bound.overall(
        report["summary"][name]["within_bound"] for name in ("system", "bundled")
    )


def test_bench_generator_only_h3_prints_http3_beside_http2_and_says_there_is_no_reference():
    """``--only h3``: the engine's h3 requests and h3_new new connections per CPU-second beside its own
    h2 and h2_new on Caddy, the ratios their own, and the output saying no reference tool exists."""
    from portal.lib.demo.caddy import find_binary

    if not find_binary():
        pytest.skip("needs caddy")
    args = ("--only", "h3", "--duration", "1", "--warmup", "0.3", "--users", "2")
    proc, report = bench_run("generator", *args, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "no reference tool" in proc.stdout and report["reference"] is None
    (run,) = report["h3_runs"]
    for arm in ("h2", "h3", "h2_new", "h3_new"):
        figures = run[arm]
        assert figures["requests"] > 0 and figures["failures"] == 0 and figures["per_cpu_s"] > 0, arm
        assert figures["cpu_us_per_request"] == round(1e6 / figures["per_cpu_s"], 1)
    for arm in ("h2_new", "h3_new"):  # a new connection per request
        assert run[arm]["connections_per_cpu_s"] > 0 and run[arm]["connections_opened"] > 0
    assert run["h3_vs_h2"] == round(run["h3"]["per_cpu_s"] / run["h2"]["per_cpu_s"], 3)
    assert report["h3_new_vs_h2_new_median"] == run["h3_new_vs_h2_new"] > 0
    assert report["target"] == 0.5 and "(target 0.5: " in proc.stdout
    # Each median judged against it, as the output says.
    assert report["met"] == {
        "h3": report["h3_vs_h2_median"] >= 0.5,
        "h3_new": report["h3_new_vs_h2_new_median"] >= 0.5,
    }
