from __future__ import annotations

import pytest

from portal.runs.forms import RunForm


def data(**overrides) -> dict:
    base = {
        "plain_url": "http://127.0.0.1:8081/1k",
        "tls_url": "https://127.0.0.1:8443/1k",
        "arms": ["plain", "tls", "tls_new"],
        "users": 4,
        "spawn_rate": 4,
        "warmup_s": 1,
        "duration_s": 5,
        "verify_tls": "",
    }
    base.update(overrides)
    return base


def test_valid_form_builds_engine_config_in_canonical_arm_order():
    form = RunForm(data(arms=["tls_new", "plain", "tls"]))
    assert form.is_valid(), form.errors
    config = form.engine_config()
    assert [a["name"] for a in config["arms"]] == ["plain", "tls", "tls_new"]
    assert config["arms"][0]["url"] == "http://127.0.0.1:8081/1k"
    assert config["arms"][2]["url"] == "https://127.0.0.1:8443/1k"
    assert config["verify_tls"] is False
    assert form.target_name_or_default() == "127.0.0.1"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"plain_url": "https://127.0.0.1/x"}, "plain_url", "Needs an http:// URL"),
        ({"tls_url": "http://127.0.0.1/x"}, "tls_url", "Needs an https:// URL"),
        ({"tls_url": "not a url"}, "tls_url", "Enter a valid URL"),
        ({"tls_url": ""}, "tls_url", "Required for the arm(s) tls, tls_new"),
        ({"plain_url": "", "arms": ["plain"]}, "plain_url", "Required for the arm(s) plain"),
        ({"plain_url": "http://u:p@127.0.0.1/"}, "plain_url", "credentials"),
        ({"users": 0}, "users", "greater than or equal to 1"),
        ({"users": 10_000}, "users", "less than or equal to 500"),
        ({"duration_s": 0.5}, "duration_s", "greater than or equal to 1"),
        ({"duration_s": 100_000}, "duration_s", "less than or equal to 3600"),
        ({"warmup_s": -1}, "warmup_s", "greater than or equal to 0"),
        ({"arms": []}, "arms", "This field is required"),
        ({"arms": ["bogus"]}, "arms", "Select a valid choice"),
    ],
)
def test_bad_input_gets_a_field_error(overrides, field, message):
    form = RunForm(data(**overrides))
    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors


def test_tls_only_run_needs_no_plain_url():
    form = RunForm(data(plain_url="", arms=["tls", "tls_new"]))
    assert form.is_valid(), form.errors
