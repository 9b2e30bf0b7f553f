"""The issue's 'done when': all five arms against a real nginx, through the whole pipeline."""

from __future__ import annotations

import pytest

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run, RunReport
from tests.engine_config import engine_config
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
# serial: its figures compare CPU or latency, so it runs alone, after the parallel part (Makefile).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]


def test_five_arms_against_nginx_give_split_costs_tls_facts_and_validity(owner):
    from bench.nginx import Nginx

    with Nginx() as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        arms = ["plain", "tls", "plain_new", "tls_new", "tls_resumed"]
        config = engine_config(
            [
                {"name": a, "url": nginx.tls_url("/1k") if "tls" in a else nginx.plain_url("/1k")}
                for a in arms
            ],
            warmup_s=0.3,
            rounds=3,
            arrival_rate=60,
        )
        run = runner.execute_run(services.create_run(owner, target, config).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.arms.count() == 15
    assert RunReport.objects.filter(run=run).exists()  # computed once, by the worker, at the end
    report = reporting.run_report(run)
    # The split: connect and handshake exist exactly where connections are opened per request.
    for name in ("plain", "tls"):
        assert report["arms"][name]["connect_us"] is None and report["arms"][name]["tls_handshake_us"] is None
    assert report["arms"]["plain_new"]["connect_us"]["count"] == report["arms"]["plain_new"]["requests"]
    assert report["arms"]["plain_new"]["tls_handshake_us"] is None
    for name in ("tls_new", "tls_resumed"):
        assert report["arms"][name]["tls_handshake_us"]["count"] == report["arms"][name]["requests"]
    # Resumed handshakes are cheaper than full ones, measured on the same server.
    assert (
        report["arms"]["tls_resumed"]["tls_handshake_us"]["p50"]
        < report["arms"]["tls_new"]["tls_handshake_us"]["p50"]
    )
    # The four costs, each with an interval over the 3 rounds and a verdict (nginx resumes sessions).
    costs = {c["name"]: c for c in report["costs"] if c["metric"] == "ttlb_p50_us"}
    assert set(costs) == {"keepalive_tls", "new_connection_tls", "handshake", "resumption_saving"}
    for cost in costs.values():
        assert cost["ci_method"] == "rounds" and cost["ci95"][0] <= cost["delta"] <= cost["ci95"][1]
        assert cost["verdict"] in ("negligible", "noticeable", "significant")
    assert costs["handshake"]["delta"] > 0 and costs["resumption_saving"]["delta"] > 0
    # What nginx says it is, on both URLs (bench/nginx.py turns server_tokens off: no version).
    assert report["run"]["target"]["server_software"] == {"tls": "nginx", "plain": "nginx"}
    # TLS facts from a real handshake with nginx.
    facts = report["tls_info"]
    assert facts["protocol"] in ("TLSv1.2", "TLSv1.3") and facts["cert_key_type"] == "RSA"
    assert facts["cert_key_bits"] == 2048 and facts["session_ticket"] is True
    # What nginx accepts, probed inside the engine on the bundled library: its OpenSSL 3.0 refuses the
    # hybrid group with an alert, takes X25519, and asks for no client certificate.
    groups = {g["name"]: g for g in facts["groups"]}
    assert groups["X25519MLKEM768"]["accepted"] is False and groups["X25519"]["accepted"] is True
    assert (
        facts["accept_probe"]["tls_library"]["choice"] == "bundled" and facts["accept_probe"]["error"] is None
    )
    assert facts["client_cert_requested"] is False
    # The validity panel is complete; nothing is wrong with this run's status codes or pages.
    found = {v["check"]: v for v in report["validity"]}
    assert found["status_codes"]["status"] == found["content_length"]["status"] == "pass"
    assert found["tls_sessions"]["status"] == "pass"


def test_nginx_ending_connections_after_five_requests_fails_the_keepalive_check(owner):
    from bench.nginx import Nginx

    # The access log is the server's own account: which connection served each request, and its count.
    with Nginx(
        keepalive_requests=5, access_log_format="$server_port $connection $connection_requests"
    ) as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        config = engine_config(
            {"plain": nginx.plain_url("/1k"), "tls": nginx.tls_url("/1k")},
            users=2,
            spawn_rate=100,
            warmup_s=0.5,
            duration_s=2.0,
            arrival_rate=200,
        )
        run = runner.execute_run(services.create_run(owner, target, config).pk)
        served: dict[int, dict[str, int]] = {nginx.plain_port: {}, nginx.tls_port: {}}
        for line in nginx.access_log_lines():
            port, connection, count = line.split()
            seen = served[int(port)]
            seen[connection] = max(seen.get(connection, 0), int(count))
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = reporting.run_report(run)
    for name, port in (("plain", nginx.plain_port), ("tls", nginx.tls_port)):
        arm = report["arms"][name]
        # The engine's count against nginx's: no connection served more than 5 requests, all but a few
        # (the preflight's, the TLS facts probe's, each user's last) exactly 5, and the window's
        # connections one per 5 requests.
        per_connection = list(served[port].values())
        assert max(per_connection) == 5 and sum(1 for n in per_connection if n < 5) <= 6
        assert len(per_connection) >= arm["connections_opened"] == arm["connections_reopened"] > 0
        assert abs(5 * arm["connections_opened"] - arm["requests"]) <= 5 * 2
    found = next(v for v in report["validity"] if v["check"] == "keepalive")
    assert found["status"] == "fail" and found["arms"] == ["plain", "tls"]
    assert all(0.15 <= found["evidence"][name]["new_connection_share"] <= 0.25 for name in ("plain", "tls"))
    cost = next(c for c in report["costs"] if c["name"] == "keepalive_tls" and c["metric"] == "ttlb_p50_us")
    assert cost["verdict"] is None and "(keepalive)" in cost["not_judged"]
