"""The done-when of issue 34 through the portal, against real servers: a run ``tls, h2, h3, h3_new,
h3_resumed, h3_0rtt`` against Caddy (HTTP/3 on, 0-RTT on) stored by the worker and reported — every
HTTP/3 answer row measured with a value and, over three rounds, an interval; the WAN table paying a
new QUIC connection fewer round trips than a new TCP + TLS one — and against nginx (no QUIC) the h3
arms refused with their reason, their answer rows saying so."""

from __future__ import annotations

import pytest

from bench.caddy import Caddy
from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from tests.engine_config import engine_config
from workers import runner

pytestmark = pytest.mark.django_db(transaction=True)

ARMS = ("tls", "h2", "h3", "h3_new", "h3_resumed", "h3_0rtt")
H3_ROWS = ("h3_vs_h2", "h3_vs_tls", "h3_resumption_saving", "h3_0rtt_saving")
LOAD = {"users": 2, "spawn_rate": 20, "warmup_s": 0.3, "duration_s": 0.8, "rounds": 3, "verify_tls": False}


@pytest.fixture(scope="module")
def caddy():
    try:
        server = Caddy(key_types=("ec",)).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


def run_of(user, name: str, url: str, **config) -> Run:
    arms = dict.fromkeys(ARMS, url)
    target = services.get_or_create_target(personal_project(user), name, url.replace("https", "http"), url)
    built = engine_config(arms, **{**LOAD, "arrival_rate": 100, **config})
    return runner.execute_run(services.create_run(user, target, built).pk)


@pytest.fixture(scope="module")
def caddy_report(caddy, django_db_blocker, django_db_setup):
    with django_db_blocker.unblock():
        from django.contrib.auth import get_user_model

        user, _ = get_user_model().objects.get_or_create(username="h3caddy")
        run = run_of(user, "caddy-h3", caddy.tls_url("/1k"))
        return run, reporting.export_report(run)


def test_a_run_against_caddy_answers_what_http3_costs_and_saves(caddy_report):
    run, report = caddy_report
    assert run.status == Run.Status.SUCCEEDED, run.error
    answers = {a["key"]: a for a in report["answers"]}
    for key in H3_ROWS:
        row = answers[key]
        assert not row["not_measured"] and row["value"] is not None, row
        assert row["ci95"] and row["ci_method"] == "rounds", row  # three rounds: an interval each
    assert report["arms"]["h3_0rtt"]["tls_sessions_reused"] > 0
    wan = {(w["arm"], w["rtt_ms"]): w for w in report["wan"]}
    assert wan[("h3_resumed", 200.0)]["model"]["quic"] == 1 and wan[("h3", 200.0)]["round_trips"] == 1


def test_the_quic_facts_of_a_real_run_reach_the_report(caddy_report):
    _, report = caddy_report
    assert [q["arm"] for q in report["quic"]] == ["h3", "h3_new", "h3_resumed", "h3_0rtt"]
    check = next(c for c in report["validity"] if c["check"] == "http3")
    assert check["status"] in ("pass", "warn", "fail")
    zero = next(q for q in report["quic"] if q["arm"] == "h3_0rtt")
    assert zero["early_data"]["accepted"] > 0 and zero["version"] == "1"
    wan = {(w["arm"], w["rtt_ms"]): w for w in report["wan"]}
    assert wan[("h3_new", 200.0)]["round_trips"] < wan[("tls", 200.0)]["round_trips"] + 2


def test_against_nginx_the_h3_arms_are_refused_with_their_reason(django_user_model):
    from bench.nginx import Nginx

    try:
        nginx = Nginx(http2=True).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        user = django_user_model.objects.create_user("h3nginx")
        run = run_of(user, "nginx-h3", nginx.tls_url("/1k"), rounds=1)
    finally:
        nginx.stop()
    report = reporting.export_report(run)
    refused = {r["arm"]: r["reason"] for r in run.refused_arms}
    assert set(refused) == {"h3", "h3_new", "h3_resumed", "h3_0rtt"}, refused
    assert all("UDP" in why or "QUIC" in why for why in refused.values()), refused
    answers = {a["key"]: a for a in report["answers"]}
    assert answers["h3_vs_h2"]["not_measured"] == "h3 arm refused"
    assert "h2" in report["arms"] and answers["h3_vs_tls"]["why_not"].startswith("h3 arm refused: ")
