"""Issue 32's 'done when', through the whole pipeline: the demo's Caddy, the run form's defaults plus
the HTTP/2 and mTLS arms ticked and a bundled-library group matrix, and no server of the user's own.
The report answers what HTTP/2, the client certificate and the post-quantum hybrid cost, each with
an interval and the demo server's CPU (the form's "Sample a local process", pre-filled with the
demo's Caddy); what each arm did is checked against Caddy's own access log.

Short windows and 3 rounds (server CPU gets its interval over rounds): the test checks that every
answer is there, with its evidence, not which way a latency goes.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from portal.console import demo
from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from tests.servers import closed_port
from workers import runner

# serial: it samples the server's CPU per request and compares handshake costs.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]


def test_the_demo_answers_http2_client_certificate_and_hybrid_costs_with_cpu(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    settings.TOLLGATE_LOCAL_PROBE = True
    demo.ensure_demo_user()
    target_ports = {"plain_port": closed_port(), "tls_port": closed_port(), "mtls_port": closed_port()}
    started = demo.start_demo_target(tmp_path / "demo-target", **target_ports)
    try:
        target = demo.store_demo_target(started)
        owner = get_user_model().objects.get(username=demo.DEMO_USER)
        assert target.project == personal_project(owner) and target.mtls_url == started.mtls_url
        data = {
            name: field.initial for name, field in RunForm.base_fields.items() if field.initial is not None
        }
        data.update(
            plain_url=started.plain_url,
            tls_url=started.tls_url,
            verify_tls=False,
            local_process=demo.PROCESS_NAME,  # the form's pre-fill in the demo
            arms=["plain", "tls", "tls_new", "tls_mtls", "h2"],
            tls_library="bundled",
            tls_matrix=["group"],
            warmup_s=0.3,
            duration_s=1.2,
            rounds=3,
        )
        form = RunForm(data=data, project=target.project)
        assert form.is_valid(), form.errors  # tls_mtls needs no certificate typed: the target holds one
        run = runner.execute_run(services.create_run(owner, target, form.engine_config()).pk)
    finally:
        demo.stop_processes(started.procs)
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = reporting.run_report(run)
    # The tls_mtls arm went to the mTLS port, the others to the TLS URL, as the arms' URLs say.
    urls = {arm: report["arms"][arm]["url"] for arm in ("tls_new", "tls_mtls", "h2")}
    assert urls["tls_mtls"] == started.mtls_url and urls["tls_new"] == urls["h2"] == started.tls_url
    costs = {(c["name"], c["metric"]): c for c in report["costs"]}
    for name in ("client_certificate", "h2_vs_tls"):
        cost = costs[name, "ttlb_p50_us"]
        assert cost["ci_method"] == "rounds" and cost["ci95"][0] <= cost["delta"] <= cost["ci95"][1], name
        assert cost["verdict"] in ("negligible", "noticeable", "significant"), name
    # The demo server's CPU per request in every arm, sampled from its Caddy by name (cost entries take
    # server CPU from an SSH probe only; the per-arm figures and the hybrid's price take this one).
    local = report["probes"]["generator_cpu"]
    for arm in ("plain", "tls", "tls_new", "tls_mtls", "h2", "tls_new@mlkem"):
        assert local[arm]["process"] == demo.PROCESS_NAME and local[arm]["cpu_ms_per_req"] > 0, arm
    matrix = {m["arm"]: m for m in report["matrix"]}
    assert {name for name, m in matrix.items() if m["status"] == "measured"} == {
        "tls_new@x25519",
        "tls_new@p256",
        "tls_new@mlkem",
    }
    assert matrix["tls_new@mlkem"]["negotiated"]["group"] == "X25519MLKEM768"
    hybrids = [item["hybrid"] for item in report["advice"] if item.get("hybrid")]
    assert {h["versus"] for h in hybrids} == {"x25519", "secp256r1"}
    for hybrid in hybrids:
        assert hybrid["ttlb_ci95"] is not None and hybrid["server_cpu_ci95"] is not None
        assert hybrid["cpu_source"] == "local_process" and hybrid["process"] == demo.PROCESS_NAME
        assert 1100 <= hybrid["client_bytes"] <= 1200
    # Caddy's own account: the certificate reached only the mTLS port, on every tls_mtls request;
    # h2's requests came over HTTP/2; tls_new never resumed a session.
    seen = Counter()
    for line in started.access_log.read_text().splitlines():
        entry = json.loads(line)
        request, tls = entry["request"], entry["request"].get("tls") or {}
        port = int(request["host"].rsplit(":", 1)[1]) if ":" in request["host"] else 0
        seen[port, request["proto"], bool(tls.get("client_common_name")), bool(tls.get("resumed"))] += 1
    mtls_port, tls_port = target_ports["mtls_port"], target_ports["tls_port"]
    mtls = report["arms"]["tls_mtls"]
    assert seen[mtls_port, "HTTP/1.1", True, False] >= mtls["requests"]
    assert not any(cert for (port, _, cert, _) in seen if port != mtls_port)
    assert seen[tls_port, "HTTP/2.0", False, False] >= report["arms"]["h2"]["requests"]
