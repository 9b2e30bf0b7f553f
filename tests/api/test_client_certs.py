"""Client certificates (mutual TLS) on a target: given once (API, run form, CLI files), stored
encrypted, sealed into the runs that present one, never rendered back (page, API, report)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError

from portal import vault
from portal.console import run_options as cli_options
from portal.lib.tls import certs
from portal.runs.configs import engine_dict
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets.models import ClientCertificate
from tests.api.conftest import inline

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def pair():
    return certs.make_client_cert(certs.make_ca(), "portal-client", "rsa")


@pytest.fixture
def auth(world, bearer):
    return bearer(world["users"]["member"], world["a"].project, "run")


def post(client, data, auth):
    return client.post("/api/v1/runs", data, "application/json", **auth)


def mtls_run(**extra) -> dict:
    return inline(arms=["tls_new", "tls_mtls"], **extra)


def test_a_pair_given_to_the_api_is_stored_encrypted_and_never_shown(client, world, auth, pair):
    cert_pem, key_pem = pair
    body = key_pem.splitlines()[1]  # a line of the key's base64
    answer = post(client, mtls_run(client_cert={"cert": cert_pem, "key": key_pem}), auth)
    assert answer.status_code == 201, answer.json()
    stored = ClientCertificate.objects.get()
    assert stored.key_type == "rsa" and stored.subject == "CN=portal-client"
    # At rest: ciphertext only, the key nowhere in the row or the run's config.
    assert stored.pair_enc != key_pem and body not in stored.pair_enc and "BEGIN" not in stored.pair_enc
    assert vault.unseal(stored.pair_enc) == {"cert": cert_pem.strip() + "\n", "key": key_pem.strip() + "\n"}
    run = Run.objects.get(code=answer.json()["id"])
    assert body not in json.dumps(run.config) and "BEGIN" not in json.dumps(run.config)
    assert run.config["client_certs"]["rsa"]["subject"] == "CN=portal-client"
    # The engine (stdin only) gets the pair; the API answer and the report page show the facts only.
    assert engine_dict(run.config, with_secrets=True)["client_certs"]["rsa"]["key"].strip() == key_pem.strip()
    assert "client_certs" not in engine_dict(run.config)
    shown = client.get(f"/api/v1/runs/{run.code}", **auth).content.decode()
    assert "CN=portal-client" in shown and body not in shown and "BEGIN" not in shown


def test_later_runs_present_the_stored_pair_and_a_target_without_one_is_refused(client, auth, pair):
    assert post(client, mtls_run(client_cert={"cert": pair[0], "key": pair[1]}), auth).status_code == 201
    again = post(client, mtls_run(), auth)  # the same target: its stored certificate
    assert again.status_code == 201
    run = Run.objects.get(code=again.json()["id"])
    assert engine_dict(run.config, with_secrets=True)["client_certs"]["rsa"]["cert"].startswith("-----BEGIN")
    other = post(client, mtls_run(tls="https://127.0.0.1:9/other"), auth)
    assert other.status_code == 400
    assert "holds none" in " ".join(other.json()["errors"]["client_cert"])
    wrong = post(client, mtls_run(client_cert={"cert": pair[0], "key": "nope"}), auth)
    assert wrong.status_code == 400 and "not an unencrypted PEM key" in str(wrong.json()["errors"])
    assert ClientCertificate.objects.count() == 1


def test_the_run_form_never_renders_a_pasted_key_back(world, pair):
    data = {**inline(arms=["tls_mtls"]), "arms": ["tls_mtls"], "auth_type": "none"}
    stranger_key = certs.make_client_cert(certs.make_ca(), "other", "ec")[1]
    form = RunForm(
        {**data, "client_cert_pem": pair[0], "client_key_pem": stranger_key}, project=world["a"].project
    )
    assert not form.is_valid() and "client_cert_pem" in form.errors
    assert "does not belong" in str(form.errors["client_cert_pem"])
    html = str(form["client_key_pem"]) + str(form["client_cert_pem"])
    assert stranger_key.splitlines()[1] not in html and pair[0].splitlines()[1] not in html


def test_the_cli_reads_the_pair_from_files(tmp_path, pair):
    (tmp_path / "c.pem").write_text(pair[0])
    (tmp_path / "k.pem").write_text(pair[1])
    texts = cli_options.client_cert_files(
        {"client_cert": tmp_path / "c.pem", "client_key": tmp_path / "k.pem"}
    )
    assert texts == {"client_cert_pem": pair[0], "client_key_pem": pair[1]}
    with pytest.raises(CommandError, match="go together"):
        cli_options.client_cert_files({"client_cert": tmp_path / "c.pem"})
    with pytest.raises(CommandError, match="--client-key: cannot read"):
        cli_options.client_cert_files({"client_cert": tmp_path / "c.pem", "client_key": tmp_path / "no"})
