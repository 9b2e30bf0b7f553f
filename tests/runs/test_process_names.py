"""One rule for the process names sampled with ``pgrep -x -- NAME``: the forms, the model, the CLI
(tests/runs/test_bad_input.py) and the sampler itself refuse the same names."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from portal.lib.runs.names import process_name_problem
from portal.runs.forms import RunForm
from portal.targets.forms import SshAccessForm
from portal.targets.models import SshAccess
from workers.probes.ssh import ProbeError, sampler_script

RUN = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "arms": ["plain"],
    "users": 1,
    "spawn_rate": 1,
    "warmup_s": 0,
    "duration_s": 1,
}
SSH = {"host": "127.0.0.1", "port": 22, "username": "probe", "key_source": "generate"}
BAD = ["-x", "-", "--help", "-oProxyCommand", "a b", "a;reboot", "$(id)", "a" * 16, "ngïnx", "a\tb"]
GOOD = ["nginx", "tollgate-demo", "php-fpm8.2", "x", "a" * 15, "icman", "gunicorn:", "_", "c++"]


@pytest.mark.parametrize("name", BAD)
def test_a_bad_process_name_is_refused_everywhere(name):
    assert process_name_problem(name)
    form = RunForm({**RUN, "local_process": name})
    assert not form.is_valid() and "not starting with -" in form.errors["local_process"][0]
    form = SshAccessForm({**SSH, "server_process": name})
    assert not form.is_valid() and "not starting with -" in form.errors["server_process"][0]
    access = SshAccess(host="h", username="u", private_key_enc="k", public_key="p", server_process=name)
    with pytest.raises(ValidationError) as raised:
        access.full_clean(exclude=["target"])
    assert "server_process" in raised.value.message_dict
    with pytest.raises(ProbeError, match="refused to sample"):
        sampler_script(name)


def test_dash_x_never_reaches_pgrep_as_an_option():
    """`pgrep -x -- -x` would be safe, but "-x" names no process anyone means: refused first."""
    with pytest.raises(ProbeError):
        sampler_script("-x")
    assert "pgrep -x -- nginx" in sampler_script("nginx")


def test_a_trailing_newline_is_no_loophole():
    assert process_name_problem("nginx\n") and process_name_problem("\nnginx")


@pytest.mark.parametrize("name", GOOD)
def test_good_process_names_pass_everywhere(name):
    assert process_name_problem(name) is None
    form = RunForm({**RUN, "local_process": name})
    assert form.is_valid(), form.errors
    assert form.engine_config()["probes"] == {"local_process": name}
    form = SshAccessForm({**SSH, "server_process": name})
    assert form.is_valid(), form.errors
    SshAccess(host="h", username="u", private_key_enc="k", public_key="p", server_process=name).full_clean(
        exclude=["target"]
    )
    assert f"pgrep -x -- {name}" in sampler_script(name) or "pgrep -x -- '" in sampler_script(name)
