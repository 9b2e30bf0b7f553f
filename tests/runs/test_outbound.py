"""The outbound address policy where runs are made and started: forms and the CLI refuse before
anything is stored or queued, the worker checks again and pins, a rebinding name cannot move the
load, a redirect to a refused host is never followed. Every server is on loopback; names are
answered by a stub (never DNS)."""

from __future__ import annotations

import io
import json
import os
import socket
from pathlib import Path

import pytest
import redis
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal import outbound
from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.runs.factories import VALID_FORM
from tests.servers import HostsSeen, LocalServer, pages_handler
from workers import runner

GUARD = Path(__file__).resolve().parent.parent / "workers" / "dnsguard"
HINT = "an operator can allow it with TOLLGATE_ALLOW_NETWORKS"
FORM = {**VALID_FORM, "users": "1", "spawn_rate": "10", "warmup_s": "0.2", "duration_s": "1"}


class Rebinding:
    """getaddrinfo of this process: ``rebind.test`` is 127.0.0.1 the first time and 10.0.0.1 ever
    after (a DNS rebinding attack); numeric hosts are passed through; any other name is refused."""

    def __init__(self, real) -> None:
        self.real = real
        self.asked = 0

    def __call__(self, host, port, *args, **kwargs):
        if host == "rebind.test":
            self.asked += 1
            address = "127.0.0.1" if self.asked == 1 else "10.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
        if host is None or host.replace(".", "").isdigit() or ":" in host:
            return self.real(host, port, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"stub resolver: {host}")


@pytest.fixture
def rebinding(monkeypatch):
    stub = Rebinding(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", stub)
    return stub


@pytest.fixture
def guarded_engine(monkeypatch, tmp_path) -> Path:
    """The engine subprocesses of this test log and refuse every name lookup (tests/workers/dnsguard)."""
    log = tmp_path / "dns.log"
    monkeypatch.setenv("PYTHONPATH", str(GUARD))
    monkeypatch.setenv("DNS_GUARD_LOG", str(log))
    return log


@pytest.fixture
def broker():
    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    client.delete("runs")
    yield client
    client.delete("runs")


def config(url: str) -> dict:
    return engine_config({"plain": url}, arrival_rate=60)


def new_run(owner, url: str) -> Run:
    """A run whose URL never met a form (stored before the policy, or changed since)."""
    target = Target.objects.create(project=personal_project(owner), name="t", plain_url=url)
    return services.create_run(owner, target, config(url))


@pytest.mark.django_db
def test_the_run_form_refuses_internal_addresses_and_queues_nothing(
    client, owner, broker, django_capture_on_commit_callbacks
):
    client.force_login(owner)
    data = {**FORM, "plain_url": "http://10.0.0.1:8081/1k", "tls_url": "https://[::ffff:169.254.169.254]/"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("runs-new"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert errors["plain_url"] == [f"10.0.0.1 is a private address (10.0.0.0/8); {HINT}."]
    assert (
        "::ffff:169.254.169.254 is an IPv4-mapped form of 169.254.169.254, a cloud metadata"
        in (errors["tls_url"][0])
    )
    assert f"10.0.0.1 is a private address (10.0.0.0/8); {HINT}." in response.content.decode()
    assert Run.objects.count() == 0 and Target.objects.count() == 0
    assert broker.llen("runs") == 0


@pytest.mark.django_db
def test_loopback_needs_the_allow_list(client, owner, settings):
    settings.TOLLGATE_ALLOW_NETWORKS = []
    form = RunForm(FORM)
    assert not form.is_valid()
    assert form.errors["plain_url"] == [f"127.0.0.1 is a loopback address (127.0.0.0/8); {HINT}."]
    client.force_login(owner)
    response = client.post(
        reverse("targets-list"), {"name": "x", "plain_url": "http://127.1:8081/", "tls_url": ""}
    )
    assert "127.0.0.1 is a loopback address" in response.context["form"].errors["plain_url"][0]
    assert not Target.objects.exists()
    settings.TOLLGATE_ALLOW_NETWORKS = ["127.0.0.0/8", "::1/128"]
    assert RunForm(FORM).is_valid()


@pytest.mark.django_db(transaction=True)
def test_a_url_refused_at_run_start_fails_the_run_and_sends_nothing(owner, plain_server, settings):
    run = new_run(owner, plain_server.url())
    settings.TOLLGATE_ALLOW_NETWORKS = []  # the operator narrowed the list after the run was queued
    run = runner.execute_run(run.pk)
    assert run.status == Run.Status.FAILED
    assert run.error == (
        f"refused by the outbound address policy: {plain_server.url()}: 127.0.0.1 is a loopback address "
        f"(127.0.0.0/8); {HINT}"
    )
    assert plain_server.counters.snapshot()["connections"] == 0
    assert not run.arms.exists()


@pytest.mark.django_db(transaction=True)
def test_the_worker_pins_the_checked_address_for_the_whole_run(owner, rebinding, guarded_engine):
    seen = HostsSeen()
    server = LocalServer(app=seen).start()
    url = f"http://rebind.test:{server.port}/1k"
    try:
        run = runner.execute_run(new_run(owner, url).pk)
    finally:
        server.stop()
    assert run.status == Run.Status.SUCCEEDED, run.error
    # Resolved once, by the worker's check; the name answers 10.0.0.1 ever since, but the engine
    # connected to the pinned 127.0.0.1 and never asked DNS itself.
    assert rebinding.asked == 1
    assert not guarded_engine.exists()
    assert run.arms.get().requests > 0
    assert set(seen.hosts) == {f"rebind.test:{server.port}"}
    assert socket.getaddrinfo("rebind.test", 80)[0][4][0] == "10.0.0.1"


@pytest.mark.django_db(transaction=True)
def test_a_name_that_rebinds_after_the_form_is_refused_at_run_start(owner, plain_server, rebinding):
    url = f"http://rebind.test:{plain_server.port}/1k"
    form = RunForm({**FORM, "plain_url": url, "arms": ["plain"], "tls_url": ""})
    assert form.is_valid(), form.errors  # the form saw 127.0.0.1
    target = services.get_or_create_target(personal_project(owner), "rebind", url, "")
    run = runner.execute_run(services.create_run(owner, target, form.engine_config()).pk)
    assert rebinding.asked == 2
    assert run.status == Run.Status.FAILED
    assert f"rebind.test resolves to 10.0.0.1, a private address (10.0.0.0/8); {HINT}" in run.error
    assert plain_server.counters.snapshot()["connections"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_redirect_to_a_refused_host_is_not_followed(owner, settings):
    settings.TOLLGATE_ALLOW_NETWORKS = ["127.0.0.1/32"]  # 127.0.0.2 is refused from here on
    other = LocalServer(host="127.0.0.2").start()
    assert not outbound.check_url(other.url()).allowed

    def redirect(request):
        if request.path == "/start":
            return 302, {"Location": other.url()}, b""
        return pages_handler(request)

    origin = LocalServer(app=redirect).start()
    try:
        run = runner.execute_run(new_run(owner, origin.url("/start")).pk)
    finally:
        origin.stop()
        other.stop()
    assert run.status == Run.Status.FAILED
    assert f"to {other.url()}, which leaves the arm's origin" in run.error
    assert other.counters.snapshot()["connections"] == 0


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")


@pytest.mark.django_db
def test_the_cli_refuses_through_the_same_rule(admin, tmp_path):
    with pytest.raises(CommandError, match=r"--plain-url: 10\.0\.0\.1 is a private address"):
        call_command("tollgate", "run", "--plain-url", "http://10.0.0.1/1k", "--arms", "plain")
    ssh = ["--ssh-host", "10.0.0.5", "--ssh-user", "probe", "--ssh-key", str(tmp_path / "id")]
    with pytest.raises(CommandError, match=r"--ssh-host: 10\.0\.0\.5 is a private address"):
        call_command("tollgate", "run", "--plain-url", "http://127.0.0.1:8081/1k", "--arms", "plain", *ssh)
    assert not Run.objects.exists() and not Target.objects.exists()


@pytest.mark.django_db
def test_check_target_prints_the_decision_and_sends_nothing(plain_server):
    out = io.StringIO()
    call_command("tollgate", "check-target", plain_server.url(), "--json", stdout=out)
    assert json.loads(out.getvalue()) == {
        "url": plain_server.url(),
        "host": "127.0.0.1",
        "addresses": ["127.0.0.1"],
        "allowed": True,
        "reason": "127.0.0.1 is a loopback address (127.0.0.0/8), allowed by TOLLGATE_ALLOW_NETWORKS "
        "(127.0.0.0/8)",
    }
    assert plain_server.counters.snapshot()["connections"] == 0
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("tollgate", "check-target", "http://0x0a.0.0.1/", stdout=out)
    assert exited.value.code == 1
    assert out.getvalue().strip() == f"refused: 10.0.0.1 is a private address (10.0.0.0/8); {HINT}"


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/1k", "http://[::1/x", "http://10.0.0.1/1k"])
def test_pins_refuse_with_a_reason_never_an_exception(url):
    # A stored URL that no form would accept today (a bad port) must still end as a refusal the
    # run can report, not as an internal error.
    with pytest.raises(outbound.Refused, match=r"^http"):
        outbound.pins([url])
