"""Server-side probes against a real sshd on loopback and a real nginx: host-key pinning, bad
credentials, CPU-ms per request per arm, the sampler's accounting against the kernel, openssl speed."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from portal import vault
from portal.lib.security.sshkeys import generate_key
from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from portal.targets.models import SshAccess
from tests.engine_config import engine_config
from workers import runner
from workers.probes.cpu import cpu_in_window
from workers.probes.ssh import CpuSampler, SshSession, SshTarget

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
# The probes whose figures compare CPU (server CPU per request, the sampler against the kernel, the
# CLI's and the local probe's figures) are `serial`: they run alone, after the parallel part
# (Makefile). The error cases (host key, credentials, ports, policy, names, no openssl) are not.
pytestmark = pytest.mark.django_db(transaction=True)


def _host_fingerprint(sshd) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(sshd.dir / "host_key.pub")], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[1]  # "256 SHA256:… comment (ED25519)"


def _access(target, sshd, *, key: str | None = None, known_hosts: str = "", process: str = "nginx"):
    pem = key or sshd.private_key
    return SshAccess.objects.create(
        target=target,
        host="127.0.0.1",
        port=sshd.port,
        username=sshd.user,
        private_key_enc=vault.encrypt(pem),
        public_key="",
        known_hosts=known_hosts,
        server_process=process,
    )


def _config(plain_url: str, tls_url: str, arms: list[str], duration_s: float = 2.0, **probes) -> dict:
    return engine_config(
        [{"name": a, "url": tls_url if a.startswith("tls") else plain_url} for a in arms],
        warmup_s=0.5,
        duration_s=duration_s,
        probes={"ssh": True, **probes},
        arrival_rate=60,
    )


def own_nginx(tmp_path) -> tuple[str, str]:
    """Debian's nginx under a name of this test's own (a symlink: the kernel names a process after
    the file it executed). The probe samples processes by name (``pgrep -x``), and another nginx on
    the machine — a parallel test's, a developer's — must not count in this test's figures."""
    from bench.nginx import find_binary

    found = find_binary()
    if found is None:
        pytest.fail("nginx not found: apt-get install nginx-light (.ci/run does)")
    name = f"ngx-{secrets.token_hex(4)}"
    link = tmp_path / name
    link.symlink_to(found)
    return str(link), name


@pytest.mark.serial
def test_server_cpu_per_request_over_ssh_orders_the_arms_and_pins_the_host_key(owner, sshd, tmp_path):
    from bench.nginx import Nginx

    binary, process = own_nginx(tmp_path)
    with Nginx(binary=binary) as nginx:
        target = services.get_or_create_target(
            personal_project(owner), "nginx", nginx.plain_url("/1k"), nginx.tls_url("/1k")
        )
        _access(target, sshd, process=process)
        config = _config(nginx.plain_url("/1k"), nginx.tls_url("/1k"), ["plain", "tls", "tls_new"], 3.0)
        run = runner.execute_run(services.create_run(owner, target, config).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.probes["errors"] == []
    # Trust on first use: the key sshd offered is pinned, with OpenSSH's own fingerprint.
    access = SshAccess.objects.get(target=target)
    assert access.host_key_fingerprint == _host_fingerprint(sshd)
    assert access.known_hosts.split()[1:] == sshd.known_hosts.split()[1:]
    assert run.probes["host_key"] == {"fingerprint": _host_fingerprint(sshd), "pinned": False}

    report = reporting.run_report(run)
    per_req = {name: report["arms"][name]["server_cpu_ms_per_req"] for name in ("plain", "tls", "tls_new")}
    # A full handshake per request costs the server far more than encryption on a warm connection.
    assert per_req["tls_new"] > 2 * per_req["tls"], per_req
    # On a warm connection, encrypting a 1 KB answer costs nginx a few µs over its ~50 µs per request:
    # less than this sampler sees in 3 s (whole 10 ms clock ticks at both edges of a window, and the
    # scheduler's own jitter — runs here differed by up to 8% either way). Asserted: the two are of
    # the same order — TLS not more than 15% below plain, beyond the ticks — so a TLS arm sampled
    # wrongly (nothing, or another process) still fails; the handshake's cost above is the ordering.
    tick_ms_per_req = {name: 2 * 10.0 / report["arms"][name]["requests"] for name in ("plain", "tls")}
    assert per_req["tls"] + tick_ms_per_req["tls"] >= 0.85 * (per_req["plain"] - tick_ms_per_req["plain"]), (
        per_req
    )
    server_cpu = report["probes"]["server_cpu"]
    for name in ("plain", "tls", "tls_new"):
        arm = server_cpu[name]
        assert arm["process"] == process and arm["samples"] >= 2
        assert arm["cpu_ms_per_req"] == per_req[name]
        assert arm["cpu_s"] == pytest.approx(arm["cpu_ms_per_req"] * arm["requests"] / 1000.0, rel=1e-3)
        assert len(arm["timeline"]) >= 2 and len(arm["cpu_pct_ma15"]) == len(arm["timeline"])
        assert all(p["threads"] >= 1 for p in arm["timeline"])
        times = [p["epoch_s"] for p in arm["timeline"]]
        assert (
            times == sorted(times)
            and run.started.timestamp() <= times[0] <= times[-1] <= run.finished.timestamp()
        )
    # The derived cost and its CI come from the same numbers.
    cpu_costs = {c["name"]: c for c in report["costs"] if c["metric"] == "server_cpu_ms_per_req"}
    # handshake needs plain_new; a new TLS connection (tls_new − plain) is the default arms' answer.
    assert set(cpu_costs) == {"keepalive_tls", "new_connection_tls"}, report["costs"]
    assert cpu_costs["keepalive_tls"]["delta"] == pytest.approx(per_req["tls"] - per_req["plain"], abs=1e-3)
    new_connection = cpu_costs["new_connection_tls"]["delta"]
    assert new_connection == pytest.approx(per_req["tls_new"] - per_req["plain"], abs=1e-3)


@pytest.mark.serial
def test_sampler_accounting_matches_the_kernel_for_the_same_pid(sshd):
    """A child that burns about 0.6 s of CPU under a unique name is sampled over SSH; when it exits,
    wait4(2) hands back the kernel's own user+system time for that PID."""
    burner = (
        "import ctypes, time\n"
        "ctypes.CDLL(None).prctl(15, b'tgburn', 0, 0, 0)\n"  # PR_SET_NAME: what pgrep -x matches
        "time.sleep(1.5)\n"
        "end = time.process_time() + 0.6\n"
        "while time.process_time() < end: pass\n"
        "time.sleep(2.5)\n"
    )
    session = SshSession(SshTarget("127.0.0.1", sshd.port, sshd.user, sshd.private_key)).connect()
    try:
        sampler = CpuSampler.over_ssh(session, "tgburn", interval_s=0.25)
        assert sampler.wait_past(0)  # a first sample: the window starts after it
        started = time.time()
        child = subprocess.Popen([sys.executable, "-c", burner])
        _, status, usage = os.wait4(child.pid, 0)
        ended = time.time()
        assert sampler.wait_past(ended)
        sampler.stop()
    finally:
        session.close()
    assert status == 0 and sampler.error is None
    kernel_s = usage.ru_utime + usage.ru_stime
    window = cpu_in_window(sampler.samples, sampler.hz, started, ended)
    assert window is not None and window["processes"] == 1
    # Both count the same ticks; the sampler can miss only the ticks after its last sample (the
    # child sleeps 2.5 s after burning, so none) and rounds to whole ticks.
    assert kernel_s > 0.5
    assert window["cpu_s"] == pytest.approx(kernel_s, abs=2.0 / sampler.hz + 0.02)
    assert max(p["cpu_pct"] for p in window["timeline"]) > 50


def test_a_changed_host_key_stops_the_probe_and_the_run_still_completes(owner, sshd, plain_server):
    from portal.lib.security.sshkeys import known_hosts_line, public_key_from_pem

    other_pem, _ = generate_key()
    wrong = known_hosts_line("127.0.0.1", sshd.port, public_key_from_pem(other_pem))
    target = services.get_or_create_target(personal_project(owner), "changed", plain_server.url("/1k"), "")
    _access(target, sshd, known_hosts=wrong + "\n", process="python3")
    config = _config(plain_server.url("/1k"), "", ["plain"], 1.0, openssl_speed=True)
    run = runner.execute_run(services.create_run(owner, target, config).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    (error,) = run.probes["errors"]
    assert f"host key of [127.0.0.1]:{sshd.port} changed" in error and _host_fingerprint(sshd) in error
    assert "openssl_speed" not in run.probes
    # The pin is kept as it was: only a user may replace it.
    assert SshAccess.objects.get(target=target).known_hosts == wrong + "\n"
    report = reporting.run_report(run)
    assert report["probes"]["errors"] == [error]
    assert report["arms"]["plain"]["requests"] > 0


def test_bad_credentials_give_a_clear_message_and_the_run_completes(owner, sshd, plain_server):
    project = personal_project(owner)
    target = services.get_or_create_target(project, "unknown_key", plain_server.url("/1k"), "")
    _access(target, sshd, key=generate_key()[0], process="python3")
    run = runner.execute_run(
        services.create_run(owner, target, _config(plain_server.url("/1k"), "", ["plain"], 1.0)).pk
    )
    assert run.status == Run.Status.SUCCEEDED, run.error
    (error,) = run.probes["errors"]
    assert "SSH authentication as" in error and "authorized_keys" in error


def test_a_closed_port_and_a_port_that_is_not_ssh_look_alike(owner, sshd, plain_server):
    """The probe must not be a port scanner: whatever answers (nothing, or a web server), the message
    is the same."""
    from tests.servers import closed_port

    target = services.get_or_create_target(personal_project(owner), "scan", plain_server.url("/1k"), "")
    access = _access(target, sshd, process="python3")
    errors = {}
    for case, port in (("closed", closed_port()), ("http", plain_server.port)):
        access.port = port
        access.save()
        run = runner.execute_run(
            services.create_run(owner, target, _config(plain_server.url("/1k"), "", ["plain"], 1.0)).pk
        )
        assert run.status == Run.Status.SUCCEEDED, run.error
        (errors[case],) = run.probes["errors"]
        errors[case] = errors[case].replace(str(port), "PORT")
    assert (
        errors["closed"] == errors["http"] == "server probe: could not open an SSH session to 127.0.0.1:PORT"
    )


def test_an_ssh_host_the_policy_refuses_is_never_contacted(owner, sshd, plain_server, settings):
    settings.TOLLGATE_ALLOW_NETWORKS = ["127.0.0.1/32"]
    target = services.get_or_create_target(personal_project(owner), "refused", plain_server.url("/1k"), "")
    access = _access(target, sshd, process="python3")
    access.host = "127.0.0.2"  # loopback, but outside the allow-list now
    access.save()
    run = runner.execute_run(
        services.create_run(owner, target, _config(plain_server.url("/1k"), "", ["plain"], 1.0)).pk
    )
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.probes["errors"] == [
        "server probe: refused by the outbound address policy: 127.0.0.2 is a loopback address "
        "(127.0.0.0/8); an operator can allow it with TOLLGATE_ALLOW_NETWORKS"
    ]
    assert run.arms.get().requests > 0


def test_a_process_name_that_matches_nothing_is_reported(owner, sshd, plain_server):
    target = services.get_or_create_target(personal_project(owner), "nothing", plain_server.url("/1k"), "")
    _access(target, sshd, process="no-such-proc")
    run = runner.execute_run(
        services.create_run(owner, target, _config(plain_server.url("/1k"), "", ["plain"], 1.0)).pk
    )
    assert run.status == Run.Status.SUCCEEDED
    assert any("no process named 'no-such-proc'" in e for e in run.probes["errors"]), run.probes


def _cli_ssh_flags(sshd, tmp_path) -> list[str]:
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(sshd.private_key)
    known = tmp_path / "known_hosts"
    known.write_text("# pinned by the operator\n" + sshd.known_hosts)
    return [
        "--ssh-host", "127.0.0.1", "--ssh-port", str(sshd.port), "--ssh-user", sshd.user,
        "--ssh-key", str(key_file), "--ssh-known-hosts", str(known),
    ]  # fmt: skip


@pytest.mark.serial
def test_cli_flags_drive_the_server_cpu_probe_with_a_known_hosts_file(owner, sshd, tmp_path, settings):
    from bench.nginx import Nginx

    out = StringIO()
    binary, process = own_nginx(tmp_path)
    with Nginx(binary=binary) as nginx:
        call_command(
            "tollgate", "run",
            "--plain-url", nginx.plain_url("/1k"), "--tls-url", nginx.tls_url("/1k"),
            "--arms", "plain,tls_new", "--users", "1", "--warmup", "0.3", "--duration", "1.5",
            "--insecure", "--owner", owner.username, *_cli_ssh_flags(sshd, tmp_path),
            "--server-process", process, "--json",
            stdout=out, stderr=StringIO(),
        )  # fmt: skip
    report = json.loads(out.getvalue())
    assert report["probes"]["errors"] == []
    assert report["probes"]["host_key"] == {"fingerprint": _host_fingerprint(sshd), "pinned": True}
    assert not report["probes"]["openssl_speed"]  # not asked for (the next test asks)
    # The flags reached the sampler: both arms sampled this test's own nginx. A 1.5 s plain arm at one
    # user costs nginx only a few clock ticks (once none, in CI), so its figure is asserted present;
    # the ordering by the handshake's cost, which the sampler cannot miss, is asserted on tls_new.
    server_cpu = report["probes"]["server_cpu"]
    for arm in ("plain", "tls_new"):
        assert server_cpu[arm]["process"] == process and server_cpu[arm]["samples"] >= 1, server_cpu
        assert report["arms"][arm]["server_cpu_ms_per_req"] >= 0, server_cpu
    per_req = {arm: report["arms"][arm]["server_cpu_ms_per_req"] for arm in ("plain", "tls_new")}
    assert per_req["tls_new"] > per_req["plain"], (per_req, server_cpu)
    # The key is stored encrypted and the stored access never holds the PEM in clear.
    access = SshAccess.objects.get(host="127.0.0.1", port=sshd.port)
    assert "PRIVATE KEY" not in access.private_key_enc
    assert vault.decrypt(access.private_key_enc) == sshd.private_key


def test_cli_openssl_speed_over_ssh_reports_signatures_and_ciphers(owner, sshd, plain_server, tmp_path):
    """``--openssl-speed`` runs ``openssl speed`` on the SSH host after the arms (about half a minute
    of one core: its figures are the server's own, compared only with each other, so not serial)."""
    out = StringIO()
    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip()  # the test server runs in this process
    call_command(
        "tollgate", "run",
        "--plain-url", plain_server.url("/1k"), "--arms", "plain", "--users", "1",
        "--warmup", "0.2", "--duration", "1", "--owner", owner.username,
        *_cli_ssh_flags(sshd, tmp_path), "--server-process", comm, "--openssl-speed", "--json",
        stdout=out, stderr=StringIO(),
    )  # fmt: skip
    report = json.loads(out.getvalue())
    assert report["probes"]["errors"] == []
    assert report["probes"]["host_key"] == {"fingerprint": _host_fingerprint(sshd), "pinned": True}
    speed = report["probes"]["openssl_speed"]["127.0.0.1"]
    assert speed["version"].startswith("OpenSSL ")
    assert set(speed["signatures"]) == {"rsa2048", "rsa3072", "rsa4096", "ecdsap256", "ed25519"}
    assert speed["signatures"]["rsa2048"]["sign_per_s"] > speed["signatures"]["rsa4096"]["sign_per_s"] > 0
    assert set(speed["ciphers"]) == {"aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"}
    assert set(speed["ciphers"]["aes-128-gcm"]) == {"16", "64", "256", "1024", "8192", "16384"}
    assert all(v > 0 for sizes in speed["ciphers"].values() for v in sizes.values()), speed["ciphers"]


@pytest.mark.serial
def test_local_process_is_sampled_on_the_generator_host_without_ssh(owner, plain_server):
    """The engine is a Python process on this host: sampling every process named like this test's
    interpreter catches it (and the test server), so CPU-ms per request comes out positive."""
    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    target = services.get_or_create_target(personal_project(owner), "local", plain_server.url("/1k"), "")
    config = _config(plain_server.url("/1k"), "", ["plain"], 1.5)
    config["probes"] = {"local_process": comm}
    run = runner.execute_run(services.create_run(owner, target, config).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.probes["errors"] == []
    report = reporting.run_report(run)
    local = report["probes"]["generator_cpu"]["plain"]
    assert local["process"] == comm and local["samples"] >= 1
    assert local["cpu_ms_per_req"] > 0 and local["requests"] == report["arms"]["plain"]["requests"]
    assert report["probes"]["server_cpu"] == {}
    assert report["arms"]["plain"]["server_cpu_ms_per_req"] is None


def test_a_server_without_openssl_gives_a_clear_error_and_the_run_completes(owner, plain_server, tmp_path):
    """An sshd whose sessions get a PATH with nothing on it: `openssl` is not found there."""
    from tests.conftest import Sshd

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    bare = Sshd(tmp_path, extra_config=f"SetEnv PATH={empty}\n").start()
    try:
        target = services.get_or_create_target(personal_project(owner), "bare", plain_server.url("/1k"), "")
        _access(target, bare, process="python3")
        config = _config(plain_server.url("/1k"), "", ["plain"], 1.0, openssl_speed=True)
        run = runner.execute_run(services.create_run(owner, target, config).pk)
    finally:
        bare.stop()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert "openssl_speed" not in run.probes
    assert any("openssl is not installed on the server" in e for e in run.probes["errors"]), run.probes
    assert reporting.run_report(run)["arms"]["plain"]["requests"] > 0
