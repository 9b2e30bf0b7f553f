"""Issue 25's 'done when': the HTTP/2 arms against a real nginx (Debian's 1.22: ``listen … ssl http2``),
through the whole pipeline, with the server's own access log as the account of what it served."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from tests.engine_config import engine_config
from tests.runs.test_probes_live import _access, own_nginx
from workers import runner

pytestmark = pytest.mark.django_db(transaction=True)

LOG = "$server_port $server_protocol $ssl_alpn_protocol $connection $connection_requests"


def _config(nginx, arms: list[str], **more) -> dict:
    urls = {a: nginx.plain_url("/1k") if a == "plain" else nginx.tls_url("/1k") for a in arms}
    load = {"users": 2, "spawn_rate": 20, "warmup_s": 0.3, "arrival_rate": 150}
    return engine_config(urls, **{**load, **more})


def test_five_arms_with_h2_show_the_http2_costs_with_intervals_and_server_cpu(owner, sshd, tmp_path, client):
    from bench.nginx import Nginx

    binary, process = own_nginx(tmp_path)
    with Nginx(binary=binary, http2=True, access_log_format=LOG) as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        _access(target, sshd, process=process)
        arms = ["plain", "tls", "tls_new", "h2", "h2_new"]
        config = _config(nginx, arms, rounds=3, probes={"ssh": True})
        run = runner.execute_run(services.create_run(owner, target, config).pk)
        served = [line.split() for line in nginx.access_log_lines()]
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = reporting.run_report(run)
    h2, h2_new = report["arms"]["h2"], report["arms"]["h2_new"]
    # The connect/handshake split is kept: per request on h2_new, none in the keep-alive h2 window.
    assert h2_new["tls_handshake_us"]["count"] == h2_new["requests"] > 0
    assert h2["tls_handshake_us"] is None and h2["requests"] > 0
    # ALPN per connection, against nginx's log: every request the h2 arms made came over HTTP/2 with
    # ALPN h2 (preflights and warm-ups included), and the client counted no more h2 connections than
    # nginx served (two users' warm connections, then one per h2_new request).
    h2_lines = [line for line in served if line[1] == "HTTP/2.0"]
    assert all(line[2] == "h2" for line in h2_lines)
    assert len(h2_lines) >= h2["requests"] + h2_new["requests"]
    h2_connections = {line[3] for line in h2_lines}
    assert h2["http2"]["alpn"] == {"h2": 2 * 3} and h2_new["http2"]["alpn"]["h2"] >= h2_new["requests"]
    assert len(h2_connections) >= h2["http2"]["alpn"]["h2"] + h2_new["http2"]["alpn"]["h2"]
    assert h2["http2"]["peer_max_streams"] == 128  # nginx's default http2_max_concurrent_streams
    # Every HTTP/1.1 line of the TLS port said ALPN http/1.1: the tls arms did not get HTTP/2.
    assert {line[2] for line in served if line[1] == "HTTP/1.1" and line[0] == str(nginx.tls_port)} == {
        "http/1.1"
    }
    # The three HTTP/2 costs, each with an interval over the 3 rounds and a verdict, and server CPU.
    costs = {(c["name"], c["metric"]): c for c in report["costs"]}
    for name in ("h2_vs_tls", "h2_vs_plain", "h2_new_vs_tls_new"):
        cost = costs[name, "ttlb_p50_us"]
        assert cost["ci_method"] == "rounds" and cost["ci95"][0] <= cost["delta"] <= cost["ci95"][1]
        assert cost["verdict"] in ("negligible", "noticeable", "significant") and not cost["unexpected"]
        assert costs[name, "server_cpu_ms_per_req"]["arm_value"] > 0
    assert "HTTP/2 on warm TLS connections (h2 vs tls)" in report["headline"]
    assert "server CPU-ms per request" in report["headline"]
    checks = {v["check"]: v for v in report["validity"]}
    assert checks["http2"]["status"] == "pass", checks["http2"]
    assert checks["same_content"]["status"] == "pass"
    # The first screen: the answer table names them with their interval and server CPU.
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    card = page[page.index('id="answers"') : page.index('id="validity"')]
    for name in ("h2_vs_tls", "h2_vs_plain", "h2_new_vs_tls_new"):
        item = card[card.index(f'data-answer="{name}"') :]
        item = item[: item.index("</tr>")]
        cells = re.findall(r'<td class="(ci|cpu)"[^>]*>([^<]*)</td>', item)
        assert [kind for kind, _ in cells] == ["ci", "cpu"] and all(" … " in text for _, text in cells), item


def test_a_server_without_h2_refuses_the_h2_arms_with_the_reason_and_measures_the_others(owner):
    from bench.nginx import Nginx

    with Nginx(access_log_format=LOG) as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        config = _config(nginx, ["tls", "h2", "h2_new"])
        run = runner.execute_run(services.create_run(owner, target, config).pk)
        served = Counter(line.split()[1] for line in nginx.access_log_lines())
    # Measured, but no cost it asked for (each HTTP/2 one against tls) could be computed: no success.
    assert run.status == Run.Status.INCOMPLETE, run.error
    assert run.error.startswith(
        "No cost could be computed — h2 arm refused: the server does not offer HTTP/2"
    )
    assert [r["arm"] for r in run.refused_arms] == ["h2", "h2_new"]
    assert all("does not offer HTTP/2 over ALPN" in r["reason"] for r in run.refused_arms)
    assert list(run.arms.values_list("arm", flat=True)) == ["tls"]
    assert served == {"HTTP/1.1": served["HTTP/1.1"]} and served["HTTP/1.1"] > 0  # never silently h1
    report = reporting.run_report(run)
    assert "Arm h2 not measured: the server does not offer HTTP/2 over ALPN" in report["headline"]


MATRIX_LOG = "$server_port $server_protocol $ssl_alpn_protocol $ssl_protocol $connection $request_method $uri"


def test_the_tls_matrix_repeats_h2_new_per_variant_and_h2_for_the_protocol(owner, client):
    """Issue 25, item 4: ``tls_matrix`` protocol with tls_new, h2_new and h2. Each HTTP/2 variant is
    a sub-arm of its own that negotiated ALPN h2 and the protocol it asked for, counted by nginx."""
    from bench.nginx import Nginx

    with Nginx(http2=True, access_log_format=MATRIX_LOG) as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        arms = ["tls_new", "h2_new", "h2"]
        config = _config(nginx, arms, users=1, arrival_rate=20, warmup_s=0.2, tls_matrix=["protocol"])
        run = runner.execute_run(services.create_run(owner, target, config).pk)
        served = [line.split() for line in nginx.access_log_lines() if line.startswith(f"{nginx.tls_port} ")]
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = reporting.run_report(run)
    matrix = {m["arm"]: m for m in report["matrix"]}
    subs = [f"{arm}@{p}" for arm in ("tls_new", "h2_new", "h2") for p in ("1.2", "1.3")]
    assert list(matrix) == subs and all(m["status"] == "measured" for m in matrix.values())
    assert set(report["arms"]) == {"tls_new", "h2_new", "h2", *subs}
    arms = report["arms"]
    for name, entry in matrix.items():
        # From the variant's probing handshake: the protocol asked for, and ALPN h2 on the HTTP/2 ones.
        assert entry["negotiated"]["protocol"] == f"TLSv{name[-3:]}", name
        assert entry["negotiated"]["alpn"] == ("http/1.1" if name.startswith("tls") else "h2"), name
        assert arms[name]["failures"] == 0 and entry["requests"] > 0, name
    # Under load, every connection of an HTTP/2 sub-arm negotiated h2 (the client's count, per arm).
    for p in ("1.2", "1.3"):
        h2_new = arms[f"h2_new@{p}"]
        assert set(h2_new["http2"]["alpn"]) == {"h2"}  # connections of the warm-up and the window
        assert h2_new["http2"]["alpn"]["h2"] >= h2_new["connections_opened"] == h2_new["requests"]
        assert arms[f"h2@{p}"]["http2"]["alpn"] == {"h2": 1}  # the one user's kept connection
        twin = matrix[f"h2_new@{p}"]["http1_cost"]
        assert twin["name"] == "h2_new_vs_tls_new" and twin["base"] == f"tls_new@{p}"
    assert {r["arm"] for r in report["wan"]} >= set(subs)
    assert {v["check"]: v for v in report["validity"]}["http2"]["status"] == "pass"
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    table = page[page.index('id="tls-matrix"') : page.index('id="advice"')]
    assert "<code>h2_new@1.2</code>" in table and "vs tls_new@1.2 (HTTP/1.1)" in table

    # What nginx served on its TLS port: HTTP/2 always with ALPN h2, HTTP/1.1 with http/1.1.
    assert {line[2] for line in served if line[1] == "HTTP/2.0"} == {"h2"}
    assert {line[2] for line in served if line[1] == "HTTP/1.1"} <= {"http/1.1", "-"}

    def lines(protocol: str, tls: str, method: str = "GET") -> list[list[str]]:
        return [line for line in served if line[1:2] + line[3:4] + line[5:6] == [protocol, tls, method]]

    # Each HTTP/2 variant's probe sent its request over HTTP/2, in its protocol: h2_new@… and h2@….
    assert len(lines("HTTP/2.0", "TLSv1.2", "HEAD")) == len(lines("HTTP/2.0", "TLSv1.3", "HEAD")) == 2

    def done(name: str) -> int:
        return arms[name]["requests"] + run.arms.get(arm=name).warmup_requests

    # TLS 1.2 is only the 1.2 sub-arms': their requests all reached nginx in that protocol, h2_new@1.2's
    # each on a connection of its own (h2@1.2's on one), the HTTP/1.1 twin's over HTTP/1.1.
    tls12_h2 = lines("HTTP/2.0", "TLSv1.2")
    assert len(tls12_h2) >= done("h2_new@1.2") + done("h2@1.2")
    assert len({line[4] for line in tls12_h2}) >= done("h2_new@1.2") + 1
    assert len(lines("HTTP/1.1", "TLSv1.2")) >= done("tls_new@1.2")
    tls13_h2 = lines("HTTP/2.0", "TLSv1.3")
    assert len(tls13_h2) >= sum(done(name) for name in ("h2_new", "h2_new@1.3", "h2", "h2@1.3"))
