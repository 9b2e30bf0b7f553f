"""A Basic-auth user name is a credential: the report says credentials were sent, never whose, on
the shared page, its JSON, CSV and status, the run page and its JSON — and a report frozen and
signed before, with the name in it, is shown without it and still verifies."""

from __future__ import annotations

import json

import pytest

from portal.lib.report import report as lib_report
from portal.lib.security import signing
from portal.runs import configs
from portal.runs.models import ArmResult, Run
from portal.sharing import services as sharing
from portal.signing import services as signing_services
from portal.signing.models import FrozenReport
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

NAME = "ci-bot-7f3a"
SECRET = "pw-5e1d-very-secret"


@pytest.fixture
def basic_run(owner):
    run = make_run(owner, seconds=4)
    config = configs.seal_into(run.config, {"auth": {"type": "basic", "user": NAME, "secret": SECRET}})
    Run.objects.filter(pk=run.pk).update(config=config)
    # The server refused some requests: the auth check fails and says why.
    ArmResult.objects.filter(run=run, arm="tls").update(status_codes={"200": 90, "401": 10})
    run.refresh_from_db()
    return run


def shared_answers(client, run, owner) -> dict[str, str]:
    _, token = sharing.create_share(owner, run=run)
    client.logout()
    answers = {
        path: client.get(f"/s/{token}/{path}").content.decode()
        for path in ("", "report.json", "report.csv", "status.json")
    }
    client.force_login(owner)
    for path in (f"/runs/{run.code}/", f"/runs/{run.code}/report.json"):
        answers[path] = client.get(path).content.decode()
    return answers


def test_the_report_says_basic_credentials_were_sent_never_whose(client, owner, basic_run):
    signing_services.freeze(basic_run)
    answers = shared_answers(client, basic_run, owner)
    for path, text in answers.items():
        assert NAME not in text and SECRET not in text, path
    report = json.loads(answers["report.json"])
    assert report["run"]["config"]["auth"] == {"type": "basic"}
    [auth] = [check for check in report["validity"] if check["check"] == "auth"]
    assert auth["status"] == "fail" and "basic credentials were rejected" in auth["detail"]
    assert "basic, pre-emptive" in answers[""]  # that credentials were sent, and how


def test_a_report_frozen_with_the_name_is_redacted_and_signed_again(client, owner, basic_run):
    """Before this change the frozen report carried ``auth.user`` and the check named it: such a
    report is redacted once (the migration signing 0002) and signed again, so it still verifies."""
    frozen = signing_services.freeze(basic_run)
    old = frozen.report()
    del old["integrity"]
    old["run"]["config"]["auth"]["user"] = NAME
    for check in old["validity"]:
        check["detail"] = check["detail"].replace(
            "credentials were rejected", f"credentials of {NAME} were rejected"
        )
    key = signing_services.active_key()
    integrity = signing.sign(old, signing_services.private_key(key), key.key_id, "2026-01-01T00:00:00+00:00")
    FrozenReport.objects.filter(pk=frozen.pk).update(body=signing.dumps({**old, "integrity": integrity}))
    assert NAME in FrozenReport.objects.get(pk=frozen.pk).body

    assert signing_services.redact_credential_names(FrozenReport, type(key)) == 1
    assert signing_services.redact_credential_names(FrozenReport, type(key)) == 0  # once
    answers = shared_answers(client, basic_run, owner)
    for path, text in answers.items():
        assert NAME not in text, path
    report = json.loads(answers["report.json"])
    assert signing.verify(report, signing_services.public_keys()) == []
    assert report["run"]["config"]["auth"] == {"type": "basic"}
    # The config hash no longer covers the name (a 64-bit hash of a guessable name would betray it).
    assert report["run"]["config_hash"] == lib_report.config_hash(report["run"]["config"])
