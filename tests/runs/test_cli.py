from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from portal.projects.models import personal_project
from portal.runs.models import Run
from tests.engine_config import engine_config

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


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
    # The status line says what the checks found, as the run page does (2 s: drift is not judged).
    assert report["run"]["checks"]["skip"] >= 1
    assert re.search(
        rf"run {run.code} succeeded (with .+|\d+ checks passed, \d+ not judged) in ", err.getvalue()
    )


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
    assert " failed: arm tls: preflight of https://127.0.0.1:1/ failed: target unreachable" in err.getvalue()
    assert json.loads(out.getvalue())["run"]["status"] == "failed"


def test_cli_rejects_bad_options(admin):
    with pytest.raises(CommandError, match="--plain-url: Needs an http:// URL"):
        call_command(
            "tollgate", "run", "--plain-url", "https://127.0.0.1/", "--tls-url", "https://127.0.0.1/"
        )
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("tollgate", "run", "--owner", "nobody", "--plain-url", "http://127.0.0.1/")
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_rotate_secrets_re_encrypts_runs_scenarios_and_ssh_keys(owner, settings):
    from portal import vault
    from portal.runs import services
    from portal.scenarios.models import Scenario
    from portal.targets.models import Target

    old, new = vault.generate_key(), vault.generate_key()
    settings.TOLLGATE_SECRET_KEYS = [old]
    target = Target.objects.create(project=personal_project(owner), name="t", plain_url="http://127.0.0.1:1/")
    config = engine_config({"plain": "http://127.0.0.1:1/"}, spawn_rate=1, warmup_s=0)  # never run
    run = services.create_run(owner, target, config, secrets={"headers": {"X-Key": "k1"}})
    scenario = Scenario.objects.create(
        project=personal_project(owner), target=target, name="s", config={"secrets": vault.seal({"a": 1})}
    )
    from portal.targets.models import SshAccess

    access = SshAccess.objects.create(
        target=target, host="h", username="u", private_key_enc=vault.encrypt("PEM"), public_key=""
    )
    from django.utils import timezone

    from portal.targets.models import ClientCertificate

    pair = ClientCertificate.objects.create(
        target=target,
        key_type="ecdsa",
        pair_enc=vault.encrypt("PAIR"),
        subject="CN=c",
        issuer="CN=ca",
        not_after=timezone.now(),
        fingerprint_sha256="00",
    )
    settings.TOLLGATE_SECRET_KEYS = [new, old]
    out = io.StringIO()
    call_command("tollgate", "rotate-secrets", stdout=out)
    # The client certificate is counted with the SSH keys ("SSH key(s) and client certificate(s)").
    assert "1 run(s) and 1 scenario(s) and 2 SSH key(s)" in out.getvalue()
    settings.TOLLGATE_SECRET_KEYS = [new]
    run.refresh_from_db()
    scenario.refresh_from_db()
    access.refresh_from_db()
    pair.refresh_from_db()
    assert vault.decrypt(access.private_key_enc) == "PEM" and vault.decrypt(pair.pair_enc) == "PAIR"
    assert vault.unseal(run.config["secrets"])["headers"] == {"X-Key": "k1"}
    assert vault.unseal(scenario.config["secrets"]) == {"a": 1}
    assert run.config["header_names"] == ["X-Key"]


def test_cli_scenario_options_rounds_and_preemptive_auth(admin, tls_cert, monkeypatch):
    import base64

    from tests.servers import AuthPages, LocalServer

    guard = AuthPages("Basic " + base64.b64encode(b"ci:pa55").decode())
    plain = LocalServer(app=guard).start()
    tls = LocalServer(tls=tls_cert, app=guard).start()
    monkeypatch.setenv("TOLLGATE_TEST_AUTH", "ci:pa55")
    out = io.StringIO()
    try:
        call_command(
            "tollgate",
            "run",
            "--plain-url",
            plain.url("/"),
            "--tls-url",
            tls.url("/"),
            "--arms",
            "plain,tls",
            "--path",
            "/1k",
            "--path",
            "/4k 3",
            "--header",
            "X-Trace: cli",
            "--basic-auth-env",
            "TOLLGATE_TEST_AUTH",
            "--send-credentials-over-http",  # the plain arm too: both servers check them
            "--rounds",
            "3",
            "--closed-loop",  # thousands of requests: the weighted mix is judged on enough of them
            "--users",
            "1",
            "--spawn-rate",
            "10",
            "--warmup",
            "0.3",
            "--duration",
            "1",
            "--insecure",
            "--json",
            stdout=out,
            stderr=io.StringIO(),
        )
    finally:
        plain.stop()
        tls.stop()
    report = json.loads(out.getvalue())
    assert guard.refused == 0  # pre-emptive: never a 401, not even in the preflight
    # The weighted mix, counted by the server: /4k (weight 3) about three times as often as /1k.
    assert 2.4 < guard.by_path["/4k"] / guard.by_path["/1k"] < 3.6, guard.by_path
    run = Run.objects.get(code=report["run"]["id"])
    # Interleaved rounds: plain, tls, plain, tls, plain, tls — each stored on its own.
    assert [(a.arm, a.round) for a in run.arms.order_by("position")] == [
        ("plain", 0),
        ("tls", 0),
        ("plain", 1),
        ("tls", 1),
        ("plain", 2),
        ("tls", 2),
    ]
    for name in ("plain", "tls"):
        arm = report["arms"][name]
        stored = run.arms.filter(arm=name)
        assert arm["requests"] == sum(a.requests for a in stored) == arm["ttlb_us"]["count"]
        assert [r["round"] for r in arm["rounds"]] == [0, 1, 2]
        assert arm["sizes_by_path"] == {"/1k": [1024], "/4k": [4096]}
        assert arm["status_codes"] == {"200": arm["requests"]}
    cost = next(c for c in report["costs"] if c["name"] == "keepalive_tls" and c["metric"] == "ttlb_p50_us")
    assert cost["ci_method"] == "rounds" and cost["samples"] == {"arm": 3, "base": 3}
    assert cost["ci95"][0] <= cost["delta"] <= cost["ci95"][1]
    assert report["run"]["config"]["headers"] == {"X-Trace": "(encrypted)"}
    assert report["run"]["config"]["auth"] == {"type": "basic"}  # never whose (the user is "ci")
    assert "pa55" not in out.getvalue() and "cli" not in json.dumps(report["run"]["config"]["headers"])


@pytest.mark.django_db
def test_bad_ssh_options_give_clear_errors_and_store_nothing(owner, tmp_path):
    from portal.lib.security.sshkeys import generate_key
    from portal.targets.models import SshAccess, Target

    key = tmp_path / "key"
    key.write_text(generate_key()[0])
    bad_key = tmp_path / "bad"
    bad_key.write_text("not a key")
    from portal.lib.security.sshkeys import known_hosts_line, public_key_from_pem

    known = tmp_path / "known_hosts"  # a valid line for another host, and a malformed one for this
    known.write_text(
        known_hosts_line("10.9.9.9", 22, public_key_from_pem(generate_key()[0]))
        + "\n127.0.0.1 ssh-ed25519 AAAA-not-base64\n"
    )
    base = ["tollgate", "run", "--plain-url", "http://127.0.0.1:9/", "--arms", "plain",
            "--owner", owner.username, "--ssh-host", "127.0.0.1", "--ssh-user", "probe"]  # fmt: skip
    cases = [
        ([], "--ssh-host needs --ssh-user and --ssh-key"),
        (["--ssh-key", str(tmp_path / "missing")], "--ssh-key: [Errno 2]"),
        (["--ssh-key", str(bad_key)], "--ssh-key: The private key is not"),
        (["--ssh-key", str(key), "--ssh-known-hosts", str(known)], "No valid known_hosts line for 127.0.0.1"),
    ]
    for extra, message in cases:
        with pytest.raises(CommandError, match=re.escape(message)):
            call_command(*base, *extra, stdout=io.StringIO(), stderr=io.StringIO())
    assert not Target.objects.exists() and not SshAccess.objects.exists() and not Run.objects.exists()
