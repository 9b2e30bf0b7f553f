from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from portal.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")


def test_cli_run_prints_the_report_and_stores_the_run(admin, plain_server, tls_server):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "tollgate",
        "run",
        "--plain-url",
        plain_server.url(),
        "--tls-url",
        tls_server.url(),
        "--arms",
        "plain,tls,tls_new",
        "--users",
        "2",
        "--spawn-rate",
        "10",
        "--warmup",
        "0.5",
        "--duration",
        "2",
        "--insecure",
        "--json",
        stdout=out,
        stderr=err,
    )
    report = json.loads(out.getvalue())
    run = Run.objects.get()
    assert report["schema"] == "tollgate.report/1"
    assert report["run"]["id"] == str(run.code) and report["run"]["status"] == "succeeded"
    assert run.owner == admin and run.source == "cli"
    assert list(report["arms"]) == ["plain", "tls", "tls_new"]
    # A full handshake per request costs time that a warm plain connection does not pay.
    assert report["arms"]["tls_new"]["ttlb_us"]["p50"] > report["arms"]["plain"]["ttlb_us"]["p50"]
    assert report["arms"]["tls_new"]["tls_handshake_us"]["p50"] > 0
    assert "succeeded" in err.getvalue()


def test_cli_failure_exits_non_zero_with_a_message(admin, plain_server):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "tollgate",
            "run",
            "--plain-url",
            plain_server.url(),
            "--tls-url",
            "https://127.0.0.1:1/",
            "--arms",
            "plain,tls",
            "--warmup",
            "0",
            "--duration",
            "1",
            "--insecure",
            "--json",
            stdout=out,
            stderr=err,
        )
    assert exit_info.value.code == 1
    assert "error: Arm tls" in err.getvalue()
    assert json.loads(out.getvalue())["run"]["status"] == "failed"


def test_cli_rejects_bad_options(admin):
    with pytest.raises(CommandError, match="--plain-url: Needs an http:// URL"):
        call_command(
            "tollgate", "run", "--plain-url", "https://127.0.0.1/", "--tls-url", "https://127.0.0.1/"
        )
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("tollgate", "run", "--owner", "nobody", "--plain-url", "http://127.0.0.1/")
    assert Run.objects.count() == 0
