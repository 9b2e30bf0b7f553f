"""The local process probe samples the worker's own machine: off unless the operator turns it on
(TOLLGATE_LOCAL_PROBE), and no process name ever reaches a shell unchecked, locally or over SSH."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.forms import RunForm
from tests.engine_config import engine_config
from workers.probes.session import ProbeSession
from workers.probes.ssh import CpuSampler, ProbeError

RUN = {"plain_url": "http://127.0.0.1:8081/1k", "arms": ["plain"], "users": 1, "spawn_rate": 1}
RUN |= {"warmup_s": 0, "duration_s": 1}
METACHARACTERS = ["a;touch {m}", "$(touch {m})", "`touch {m}`", "a|touch {m}", "a&&touch {m}", "a\ntouch {m}"]


@pytest.mark.django_db
def test_off_the_form_has_no_field_and_drops_a_posted_name(settings):
    settings.TOLLGATE_LOCAL_PROBE = False
    form = RunForm({**RUN, "local_process": "tollgate-demo"})
    assert "local_process" not in form.fields
    assert form.is_valid() and "probes" not in form.engine_config()


@pytest.mark.django_db
def test_off_the_new_run_page_does_not_show_it(client, owner, settings):
    settings.TOLLGATE_LOCAL_PROBE = False
    client.force_login(owner)
    assert 'name="local_process"' not in client.get("/runs/new/").content.decode()
    settings.TOLLGATE_LOCAL_PROBE = True
    assert 'name="local_process"' in client.get("/runs/new/").content.decode()


@pytest.mark.django_db
def test_off_the_cli_refuses_the_option(owner, settings):
    settings.TOLLGATE_LOCAL_PROBE = False
    with pytest.raises(CommandError, match="TOLLGATE_LOCAL_PROBE=1"):
        call_command(
            "tollgate",
            "run",
            "--plain-url",
            "http://127.0.0.1:1/1k",
            "--arms",
            "plain",
            "--owner",
            "owner",
            "--local-process",
            "tollgate-demo",
        )


@pytest.mark.django_db
def test_off_the_worker_ignores_a_stored_local_probe(owner, settings):
    settings.TOLLGATE_LOCAL_PROBE = False
    target = services.get_or_create_target(personal_project(owner), "t", "http://127.0.0.1:1/1k", "")
    config = engine_config(
        {"plain": "http://127.0.0.1:1/1k"}, spawn_rate=1, warmup_s=0, probes={"local_process": "python3"}
    )
    session = ProbeSession(services.create_run(owner, target, config)).start()
    assert session.local_sampler is None
    assert any("TOLLGATE_LOCAL_PROBE" in error for error in session.errors)


@pytest.mark.parametrize("template", METACHARACTERS)
def test_shell_metacharacters_are_refused_for_the_local_probe(template, tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ProbeError, match="refused to sample"):
        CpuSampler.local(template.format(m=marker))
    assert not marker.exists()


@pytest.mark.parametrize("template", METACHARACTERS)
def test_shell_metacharacters_are_refused_for_the_ssh_probe(template, tmp_path):
    # Refused before the session is touched: no command is built, nothing is sent.
    with pytest.raises(ProbeError, match="refused to sample"):
        CpuSampler.over_ssh(None, template.format(m=tmp_path / "ran"))


@pytest.mark.django_db
@pytest.mark.parametrize("template", METACHARACTERS)
def test_shell_metacharacters_are_refused_by_the_form(template):
    form = RunForm({**RUN, "local_process": template.format(m="/tmp/x")})
    assert not form.is_valid() and "local_process" in form.errors
