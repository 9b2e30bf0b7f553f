"""The run form's TLS matrix fieldset and WAN field, and the report page's matrix, advice and WAN
tables (real PostgreSQL; the engine side is in test_tls_matrix.py)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.runs.starting import RunRefused, check
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

BASE = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "users": 1,
    "spawn_rate": 1,
    "warmup_s": 1,
    "duration_s": 5,
    "rounds": 1,
    "verify_tls": "on",
}


def test_form_sends_the_matrix_to_the_engine_and_keeps_the_rtts_for_the_report():
    form = RunForm(
        {**BASE, "arms": ["plain_new", "tls_new"], "tls_matrix": ["cert", "protocol"], "wan_rtt_ms": "80, 2"}
    )
    assert form.is_valid(), form.errors
    config = form.engine_config()
    assert config["tls_matrix"] == ["protocol", "cert"] and config["wan_rtt_ms"] == [2.0, 80.0]
    defaults = RunForm({**BASE, "arms": ["tls"]})
    assert defaults.is_valid(), defaults.errors
    assert defaults.engine_config()["tls_matrix"] == [] and defaults.engine_config()["wan_rtt_ms"] == [
        2,
        20,
        80,
        200,
    ]


def test_form_refuses_a_matrix_without_tls_new_and_nonsense_rtts():
    form = RunForm({**BASE, "arms": ["tls"], "tls_matrix": ["protocol"], "wan_rtt_ms": "fast"})
    assert not form.is_valid()
    assert "tls_new" in form.errors["tls_matrix"][0]
    assert "milliseconds" in form.errors["wan_rtt_ms"][0]
    assert (
        "not one of the available choices"
        in RunForm({**BASE, "arms": ["tls_new"], "tls_matrix": ["x"]}).errors["tls_matrix"][0]
    )


def test_cli_refuses_bad_matrix_and_rtt_values_naming_the_option_and_the_fix(owner):
    base = ["tollgate", "run", "--owner", owner.username, "--plain-url", BASE["plain_url"]]
    base += ["--tls-url", BASE["tls_url"], "--arms", "plain,tls"]
    with pytest.raises(CommandError, match=r"--tls-matrix: .*add tls_new or h2_new to the arms .*--arms"):
        call_command(*base, "--tls-matrix", "group")
    with pytest.raises(CommandError, match=r"--tls-matrix: .*bogus is not one of the available choices"):
        call_command(*base, "--tls-matrix", "protocol,bogus")
    for bad, said in (("2,abc", "not 'abc'"), ("-5", "within 0–2000 ms"), ("nan", "not nan")):
        with pytest.raises(CommandError, match=f"--wan-rtt: .*{said}"):
            call_command(*base, f"--wan-rtt={bad}")
    assert not Run.objects.exists()


def test_api_takes_the_matrix_as_a_list_or_as_the_clis_comma_string(owner):
    project = personal_project(owner)
    data = {"plain_url": BASE["plain_url"], "tls_url": BASE["tls_url"], "arms": ["plain_new", "tls_new"]}
    for matrix in (["cert", "protocol"], "protocol, cert", "protocol,cert,"):
        form = check(project, {**data, "tls_matrix": matrix, "wan_rtt_ms": [80, 2]})
        assert form.is_valid(), (matrix, form.errors)
        assert form.engine_config()["tls_matrix"] == ["protocol", "cert"]
        assert form.engine_config()["wan_rtt_ms"] == [2.0, 80.0]
    with pytest.raises(RunRefused) as refused:
        check(project, {**data, "tls_matrix": "protocol, colour"})
    assert "colour is not one of the available choices" in refused.value.errors["tls_matrix"][0]


def test_new_run_page_has_the_matrix_fieldset(client, owner):
    client.force_login(owner)
    page = client.get(reverse("runs-new")).content.decode()
    assert "<legend>TLS configuration matrix" in page
    for dim in ("protocol", "group", "cert", "resumption"):
        assert f'value="{dim}"' in page
    assert 'name="wan_rtt_ms"' in page and 'value="2,20,80,200"' in page


def test_report_page_shows_matrix_advice_and_wan_tables(client, owner):
    arms = {
        "plain_new": [300] * 100,
        "tls_new": [2000] * 100,
        "tls_new@1.2+rsa": [2600] * 100,
        "tls_new@1.2+ecdsa": [1200] * 100,
    }
    # ECDSA is faster here but, say, dearer in server CPU: the page must not say "-0.1 … less".
    cpu = {"plain_new": 0.05, "tls_new": 0.4, "tls_new@1.2+rsa": 0.3, "tls_new@1.2+ecdsa": 0.4}
    run = make_run(owner, arms=arms, seconds=6, server_cpu_ms=cpu)
    variant = {"protocol": "tls1.2", "group": None, "resumption": None}
    run.variants = [
        {
            "name": "tls_new@1.2+rsa",
            "variant": {**variant, "cert": "rsa"},
            "status": "measured",
            "detail": "",
            "negotiated": {
                "protocol": "TLSv1.2",
                "group": "x25519",
                "cert_key_type": "RSA",
                "cert_key_bits": 2048,
            },
        },
        {
            "name": "tls_new@1.2+ecdsa",
            "variant": {**variant, "cert": "ecdsa"},
            "status": "measured",
            "detail": "",
            "negotiated": {
                "protocol": "TLSv1.2",
                "group": "x25519",
                "cert_key_type": "EC",
                "cert_key_bits": 256,
            },
        },
        {
            "name": "tls_new@1.3+rsa",
            "variant": {**variant, "protocol": "tls1.3", "cert": "rsa"},
            "status": "refused",
            "detail": "asked for a RSA certificate",
            "negotiated": {},
        },
    ]
    run.tls_info = {"protocol": "TLSv1.3", "chain_bytes": 800}
    run.save()
    run.arms.filter(arm="tls_new@1.2+rsa").update(connections_opened=100, tls_sessions_reused=3)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="tls-matrix"' in page and "asked for a RSA certificate" in page
    assert "TLSv1.2 · x25519 · EC 256" in page
    # The handshakes that resumed in the window, not only in the probe.
    assert "under load: 3 of 100 handshakes resumed" in page
    # Each sub-arm's cost names its own control (tls_new@… against plain_new, tls@… against plain),
    # not the first row's for the whole column (a refused first row made it say "control").
    matrix_table = page[page.index('id="tls-matrix"') : page.index('id="advice"')]
    assert matrix_table.count("vs plain_new</small>") == 2
    assert "ECDSA certificate instead of RSA certificate" in page and "1.40 ms less" in page
    assert "but 0.1000 server CPU-ms more per request" in page and "-0.1000" not in page
    assert 'id="wan"' in page
    for rtt in ("2", "20", "80", "200"):
        assert f"at {rtt} ms RTT" in page
    # tls_new (TLS 1.3 from the facts): 2.0 ms + 3 round trips × 200 ms.
    assert "602.0" in page
    # Each arm's own inputs stand next to its numbers: the p50 (µs precision) and its sample count,
    # and where the handshake flight that decides the window round trips comes from.
    wan_table = page[page.index('id="wan"') :]
    assert '<th scope="col">Samples</th>' in wan_table and "<td>2.000</td><td>100</td>" in wan_table
    assert "handshake flight 1800 bytes (chain_bytes 800 + assumed 1000)" in wan_table
    assert run.status == Run.Status.SUCCEEDED


def test_a_matrix_whose_variants_were_all_refused_gives_no_advice_and_says_why(client, owner):
    run = make_run(owner, arms={"plain_new": [300] * 50, "tls_new": [2000] * 50}, seconds=3)
    run.variants = [
        {
            "name": "tls_new@1.2",
            "variant": {"protocol": "tls1.2", "group": None, "cert": None, "resumption": None},
            "status": "refused",
            "detail": "the server refused the handshake: SSLError: ALERT",
            "negotiated": {},
        }
    ]
    run.save()
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    advice = page[page.index('id="advice"') :]
    assert "No advice" in advice and "refused variants above were not measured" in advice
    assert "add tls_resumed, or a TLS configuration matrix" not in advice


def test_cli_text_output_lists_refusals_advice_and_the_wan_table():
    from portal.console.run import report_lines
    from portal.lib.report import report
    from tests.lib.test_matrix import probe, rows

    probes = [
        probe("tls_new@1.2+rsa", protocol="tls1.2", cert="rsa"),
        probe("tls_new@1.2+ecdsa", protocol="tls1.2", cert="ecdsa"),
        probe("tls_new@1.3+rsa", "refused", "asked for a RSA certificate", protocol="tls1.3", cert="rsa"),
    ]
    arms = [rows("plain_new", 300), rows("tls_new@1.2+rsa", 1900), rows("tls_new@1.2+ecdsa", 1100)]
    data = report.build_report(
        {"id": "x", "config": {"wan_rtt_ms": [2, 200]}},
        arms,
        {"protocol": "TLSv1.3", "chain_bytes": 700},
        None,
        probes,
    )
    text = "\n".join(report_lines(data))
    assert "refused  tls_new@1.3+rsa: asked for a RSA certificate" in text
    assert (
        "advice   ECDSA certificate instead of RSA certificate: saves 0.800 ms TTLB per request (95% CI 0.798"
        in text
    )
    assert "projected TTLB (ms) at RTT" in text and "200 ms" in text
    # tls_new@1.2+ecdsa: 1.1 ms + 4 round trips (TCP 1, TLS 1.2 full 2, request 1) × 200 ms.
    assert any(
        line.split()[:2] == ["tls_new@1.2+ecdsa", "4"] and "801.100" in line for line in text.splitlines()
    )


def test_form_api_and_cli_take_named_groups_and_the_cli_prints_the_hybrids_price(owner):
    from portal.console.run import report_lines
    from portal.lib.report import report
    from tests.lib.test_matrix import hybrid_probe, rows

    form = RunForm({**BASE, "arms": ["tls_new"], "tls_matrix": ["group"], "tls_groups": "P-384, X448"})
    assert form.is_valid(), form.errors
    assert form.engine_config()["tls_groups"] == ["P-384", "X448"]
    bad = RunForm({**BASE, "arms": ["tls_new"], "tls_matrix": ["group"], "tls_groups": "x y"})
    assert not bad.is_valid() and "as OpenSSL names it" in bad.errors["tls_groups"][0]
    project = personal_project(owner)
    api = check(project, {**BASE, "arms": ["tls_new"], "tls_matrix": ["group"], "tls_groups": ["secp384r1"]})
    assert api.engine_config()["tls_groups"] == ["secp384r1"]
    with pytest.raises(CommandError, match="--tls-groups"):
        call_command(
            "tollgate",
            "run",
            "--owner",
            owner.username,
            "--tls-url",
            BASE["tls_url"],
            "--arms",
            "tls_new",
            "--tls-matrix",
            "group",
            "--tls-groups",
            "a;b",
        )
    probes = [
        hybrid_probe("tls_new@x25519", "x25519", 300, 1400),
        hybrid_probe("tls_new@mlkem", "x25519mlkem768", 1484, 2460),
    ]
    arms = [rows("tls_new@x25519", 1200, 0.5), rows("tls_new@mlkem", 1300, 0.62)]
    text = "\n".join(report_lines(report.build_report({"id": "x"}, arms, None, None, probes)))
    assert "advice   What the post-quantum hybrid costs: X25519MLKEM768" in text
    assert "costs +0.100 ms TTLB per request" in text and "saves" not in text
    assert "X25519MLKEM768 costs +100 µs of time to last byte over x25519" in text
    assert "+1184 bytes from the client, +1060 from the server" in text


def test_cli_text_output_aligns_the_long_sub_arm_names():
    import io

    from portal.console import run
    from portal.console.management.commands.tollgate import Command
    from portal.lib.report import report
    from tests.lib.test_matrix import probe, rows

    probes = [probe("tls_new@1.2+p256+ecdsa+ticket", protocol="tls1.2", group="p256", cert="ecdsa")]
    arms = [rows("plain_new", 300), rows("tls_new@1.2+p256+ecdsa+ticket", 1100)]
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3", "chain_bytes": 700}, None, probes)
    data["run"] = {**(data.get("run") or {}), "report_url": "http://h/r/"}
    out = io.StringIO()
    run.print_report(Command(stdout=out), data, as_json=False)
    arm_lines = [line for line in out.getvalue().splitlines() if " req " in line]
    assert len(arm_lines) == 2 and len({line.index(" req ") for line in arm_lines}) == 1
