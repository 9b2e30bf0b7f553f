"""Issue 34's "the demo (Caddy) answers the h3 arms out of the box": the demo's own target, the run
form's defaults plus the HTTP/3 arms ticked, no option more. Every h3 arm is measured over QUIC on
the TLS port's UDP side (read from the demo Caddy's access log, ``HTTP/3.0``), 0-RTT is accepted, and
the answer table has a value for each HTTP/3 question."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from portal.console import demo
from portal.runs import reporting, services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from tests.servers import closed_port
from workers import runner

pytestmark = pytest.mark.django_db(transaction=True)

H3_ARMS = ["h3", "h3_new", "h3_resumed", "h3_0rtt"]


def test_the_demo_answers_the_http3_arms_with_the_forms_defaults(tmp_path, settings):
    settings.VAR_DIR = tmp_path
    demo.ensure_demo_user()
    ports = {"plain_port": closed_port(), "tls_port": closed_port(), "mtls_port": closed_port()}
    started = demo.start_demo_target(tmp_path / "demo-target", **ports)
    try:
        target = demo.store_demo_target(started)
        owner = get_user_model().objects.get(username=demo.DEMO_USER)
        data = {
            name: field.initial for name, field in RunForm.base_fields.items() if field.initial is not None
        }
        data.update(
            plain_url=started.plain_url,
            tls_url=started.tls_url,
            verify_tls=False,
            arms=["h2", *H3_ARMS],
            warmup_s=0.3,
            duration_s=1.0,
        )
        form = RunForm(data=data, project=target.project)
        assert form.is_valid(), form.errors
        run = runner.execute_run(services.create_run(owner, target, form.engine_config()).pk)
    finally:
        demo.stop_processes(started.procs)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert not run.refused_arms, run.refused_arms
    report = reporting.run_report(run)
    for arm in H3_ARMS:
        assert report["arms"][arm]["requests"] > 0, arm
    quic = {row["arm"]: row for row in report["quic"]}
    assert quic["h3_0rtt"]["early_data"]["accepted"] > 0 and quic["h3_new"]["version"] == "1"
    answers = {a["key"]: a for a in report["answers"]}
    for key in ("h3_vs_h2", "h3_resumption_saving", "h3_0rtt_saving"):
        assert not answers[key]["not_measured"] and answers[key]["value"] is not None, answers[key]
    # The demo Caddy's own account: the h3 arms' requests came over HTTP/3, at least those measured.
    protos = Counter(
        json.loads(line)["request"]["proto"] for line in started.access_log.read_text().splitlines()
    )
    measured = sum(report["arms"][arm]["requests"] for arm in H3_ARMS)
    assert protos["HTTP/3.0"] >= measured > 0, protos
