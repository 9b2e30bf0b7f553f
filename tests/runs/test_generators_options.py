"""The generators option (distributed runs) through the form, the API's JSON, the CLI and the quota."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from portal.projects.models import personal_project
from portal.runs.forms import RunForm
from portal.runs.starting import RunRefused, check

pytestmark = pytest.mark.django_db

BASE = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["plain", "tls"],
    "users": 1,
    "spawn_rate": 1,
    "warmup_s": 1,
    "duration_s": 5,
    "rounds": 1,
    "verify_tls": "on",
}


def test_form_takes_a_number_or_auto_and_defaults_to_one_process():
    default = RunForm(BASE)
    assert default.is_valid(), default.errors
    assert default.engine_config()["generators"] == 1
    for typed, stored in (("4", 4), ("auto", 0), (" AUTO ", 0)):
        form = RunForm({**BASE, "generators": typed})
        assert form.is_valid(), form.errors
        assert form.engine_config()["generators"] == stored
    for bad in ("0", "65", "many"):
        assert "generators" in RunForm({**BASE, "generators": bad}).errors


def test_the_operator_caps_generators_and_the_matrix_wants_one(settings):
    settings.TOLLGATE_MAX_GENERATORS = 3
    form = RunForm({**BASE, "generators": "4"})
    assert not form.is_valid() and "At most 3 generator processes" in form.errors["generators"][0]
    assert RunForm({**BASE, "generators": "3"}).is_valid()
    matrix = RunForm({**BASE, "arms": ["tls_new"], "tls_matrix": ["protocol"], "generators": "2"})
    assert "one generator process" in matrix.errors["generators"][0]


def test_api_json_and_cli_take_generators(owner):
    project = personal_project(owner)
    data = {"plain_url": BASE["plain_url"], "arms": ["plain"]}
    assert check(project, {**data, "generators": "auto"}).engine_config()["generators"] == 0
    assert check(project, {**data, "generators": 2}).engine_config()["generators"] == 2
    with pytest.raises(RunRefused) as refused:
        check(project, {**data, "generators": "lots"})
    assert "generators" in refused.value.errors
    with pytest.raises(CommandError, match="--generators"):
        call_command("tollgate", "run", "--owner", owner.username, "--plain-url", BASE["plain_url"],
                     "--arms", "plain", "--generators", "99")  # fmt: skip
