"""Costs from real runs: a bigger RSA key must cost more per handshake."""

from __future__ import annotations

import pytest

from portal.lib.tls.certs import make_self_signed
from portal.projects.models import personal_project
from portal.runs import reporting, services
from tests.engine_config import engine_config
from tests.servers import LocalServer
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
# serial: its figures compare CPU or latency, so it runs alone, after the parallel part (Makefile).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]


def handshake_run(owner, plain: LocalServer, tls: LocalServer) -> dict:
    target = services.get_or_create_target(personal_project(owner), f"rsa-{tls.port}", plain.url(), tls.url())
    config = engine_config(
        {"plain_new": plain.url(), "tls_new": tls.url()}, warmup_s=0.5, duration_s=5.0, arrival_rate=60
    )
    run = runner.execute_run(services.create_run(owner, target, config).pk)
    return reporting.run_report(run)


def test_rsa_4096_handshakes_cost_more_than_rsa_2048(owner, tmp_path):
    small = make_self_signed(tmp_path, name="rsa2048", common_name="127.0.0.1", key_bits=2048)
    big = make_self_signed(tmp_path, name="rsa4096", common_name="127.0.0.1", key_bits=4096)
    plain = LocalServer().start()
    tls_small, tls_big = LocalServer(tls=small).start(), LocalServer(tls=big).start()
    try:
        report_small = handshake_run(owner, plain, tls_small)
        report_big = handshake_run(owner, plain, tls_big)
    finally:
        for server in (plain, tls_small, tls_big):
            server.stop()

    def cost(report: dict) -> dict:
        return next(c for c in report["costs"] if c["name"] == "handshake" and c["metric"] == "ttlb_p50_us")

    small_cost, big_cost = cost(report_small), cost(report_big)
    # Both are real costs with an interval over the per-second medians…
    for c in (small_cost, big_cost):
        assert (
            c["delta"] > 0 and c["ci_method"] == "per_second" and c["ci95"][0] <= c["delta"] <= c["ci95"][1]
        )
    # …and the server's RSA-4096 signature (about 6× the work of RSA-2048) makes each handshake dearer,
    # beyond the noise: the intervals do not overlap.
    assert big_cost["delta"] > small_cost["delta"]
    assert big_cost["ci95"][0] > small_cost["ci95"][1], (small_cost, big_cost)
    hs_small = report_small["arms"]["tls_new"]["tls_handshake_us"]["p50"]
    hs_big = report_big["arms"]["tls_new"]["tls_handshake_us"]["p50"]
    assert hs_big > hs_small
