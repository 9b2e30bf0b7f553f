"""The operators' page (/ops/, staff only) and ``tollgate healthcheck|record-bench``."""

from __future__ import annotations

import io
import json
import socket

import pytest
from django.core.management import call_command
from django.utils import timezone

from portal.ops.models import GeneratorBench
from portal.runs.models import ArmResult, GeneratorHost, Run, RunAttempt
from tests.ops.conftest import seen
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

# bench/generator's last line, the parts record-bench reads (tests/test_bench_generator.py checks
# them on the real script's output).
BENCH_LINE = json.dumps(
    {
        "engine": {
            "plain": {"requests": 90000, "cpu_s": 2.0, "per_cpu_s": 45000.0},
            "tls": {"requests": 84000, "cpu_s": 2.0, "per_cpu_s": 42000.0},
            "tls_new": {"requests": 2600, "cpu_s": 2.0, "per_cpu_s": 1300.0},
        },
        "settings": {"users": 8},
        "machine": {"cores": 4, "python": "3.11.7"},
    }
)


def test_only_staff_see_the_page(client, owner):
    assert client.get("/ops/").status_code == 302  # to the login page
    client.force_login(owner)
    assert client.get("/ops/").status_code == 404
    assert client.post("/ops/").status_code in (404, 405)


def _world(owner) -> Run:
    now = timezone.now()
    seen("celery@gen1", "gen1", ["runs"])
    seen("gen@gen2", "gen2", ["gen.gen2"], ago_s=400)
    seen("maintenance@m", "m", ["maintenance"])
    GeneratorHost.objects.create(host="gen1", last_claim=now)
    done = make_run(
        owner, arms={"plain": [400] * 200, "tls_new": [3000] * 20}, seconds=5
    )  # 20 % CPU a second
    RunAttempt.objects.create(
        run=done, number=1, worker="celery@gen1 pid 3", host="gen1", claimed=now, heartbeat=now, ended=now
    )
    running = make_run(owner, status=Run.Status.RUNNING, arms={}, target_name="busy-target")
    RunAttempt.objects.create(
        run=running,
        number=1,
        worker="celery@gen1 pid 4",
        host="gen1",
        claimed=now,
        heartbeat=now,
        current_arm="tls",
    )
    return running


def test_staff_see_hosts_heartbeats_runs_and_capacity(client, staff, owner, monkeypatch):
    running = _world(owner)
    monkeypatch.setattr("sys.stdin", io.StringIO(BENCH_LINE))
    call_command("tollgate", "record-bench", "-", "--host", "gen2")
    client.force_login(staff)
    page = client.get("/ops/").content.decode()
    assert 'data-host="gen1" data-state="alive"' in page
    assert 'data-host="gen2" data-state="silent"' in page  # 400 s since its last report
    assert 'data-host="m"' not in page  # a maintenance worker generates nothing
    assert f"/runs/{running.code}/" in page and "busy-target" in page and "arm tls" in page
    # plain: 200 requests over 10 s at 20 % of a core → 100 requests per CPU-second; tls_new: 10.
    plain = ArmResult.objects.get(arm="plain")
    assert plain.rps == 20
    assert "keep-alive: 100 (n=1)" in page and "new connection: 10 (n=1)" in page
    assert "keep-alive plain 45,000, TLS 42,000" in page and "handshakes 1,300; 4 cores" in page
    assert 'data-check="worker"' in page


def test_the_page_reads_a_fixed_number_of_rows_whatever_the_hosts(
    client, staff, owner, django_assert_max_num_queries
):
    _world(owner)
    for n in range(3, 8):
        seen(f"celery@gen{n}", f"gen{n}", ["runs"])
    client.force_login(staff)
    # session, user, readiness (database, worker), workers, claims, open attempts, benches, arms, queued
    with django_assert_max_num_queries(14):
        assert client.get("/ops/").status_code == 200


def test_record_bench_keeps_the_figures_for_this_host_by_default(tmp_path, capsys):
    out = tmp_path / "bench.txt"
    out.write_text("a table first\n" + BENCH_LINE + "\n")
    call_command("tollgate", "record-bench", str(out))
    stored = GeneratorBench.objects.get()
    assert stored.host == socket.gethostname()
    assert stored.figures == {"plain": 45000.0, "tls": 42000.0, "tls_new": 1300.0, "cores": 4, "users": 8}


def test_record_bench_refuses_the_overhead_only_output(tmp_path):
    out = tmp_path / "bench.txt"
    out.write_text(json.dumps({"overhead_runs": [], "settings": {}, "machine": {}}))
    with pytest.raises(Exception, match="full report"):
        call_command("tollgate", "record-bench", str(out))
    assert not GeneratorBench.objects.exists()


def test_healthcheck_worker_follows_this_hosts_presence(capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("tollgate", "healthcheck", "worker")
    assert exited.value.code == 1
    seen("celery@here", socket.gethostname(), ["runs"], ago_s=90)
    with pytest.raises(SystemExit):
        call_command("tollgate", "healthcheck", "worker")
    seen("maintenance@here", socket.gethostname(), ["maintenance"], ago_s=2)
    call_command("tollgate", "healthcheck", "worker", "--json")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["worker"]["ok"] is True


def test_healthcheck_ready_says_which_check_fails(capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("tollgate", "healthcheck", "ready")
    assert exited.value.code == 1
    out = capsys.readouterr().out
    assert "database: ok" in out and "worker: FAILING" in out
