"""Ownership verification against real local servers on 127.0.0.65-70, a range the tests declare
reachable but still to be verified (TOLLGATE_VERIFY_NETWORKS); every request counted server-side."""

from __future__ import annotations

import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.lib.security import verification as lib
from portal.lib.security.verification import HEADER, WELL_KNOWN_PATH
from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets import verification
from tests.engine_config import engine_config
from tests.servers import LocalServer
from workers import runner

VERIFY = "127.0.0.64/26"


class TokenSite:
    """Serves the pages, and the well-known file or header as told; remembers each path asked."""

    def __init__(self) -> None:
        self.file = b""
        self.header = ""
        self.redirect_to = ""
        self.paths: list[str] = []

    def __call__(self, request):
        self.paths.append(request.path)
        if self.redirect_to:
            return 302, {"Location": self.redirect_to}, b""
        headers = {HEADER: self.header} if self.header else {}
        if request.path == WELL_KNOWN_PATH:
            return (
                (200, {**headers, "Content-Type": "text/plain"}, self.file)
                if self.file
                else (404, headers, b"")
            )
        return 200, {**headers, "Content-Type": "text/html"}, b"x" * 1024


@pytest.fixture(autouse=True)
def _verify_range(settings):
    settings.TOLLGATE_VERIFY_NETWORKS = [VERIFY]


@pytest.fixture
def site():
    app = TokenSite()
    server = LocalServer(app=app, host="127.0.0.65").start()
    server.app = app
    yield server
    server.stop()


@pytest.fixture
def elsewhere():
    server = LocalServer(host="127.0.0.66").start()
    yield server
    server.stop()


def _target(owner, server):
    return services.get_or_create_target(personal_project(owner), "site", server.url("/1k"), "")


@pytest.mark.django_db
def test_the_token_file_verifies(owner, site):
    target = _target(owner, site)
    assert verification.status(target) == verification.UNVERIFIED
    site.app.file = f"someone-else\n{target.verification_token}\n".encode()
    outcome = verification.verify(target)
    assert outcome.verified and outcome.method == "file"
    target.refresh_from_db()
    assert target.verified_at and target.verified_by_method == "file"
    assert verification.status(target) == verification.VERIFIED
    assert site.app.paths == [WELL_KNOWN_PATH]


@pytest.mark.django_db
def test_the_header_verifies(owner, site):
    target = _target(owner, site)
    site.app.header = target.verification_token
    assert verification.verify(target).method == "header"


@pytest.mark.django_db
def test_a_wrong_token_is_refused_with_the_reason(owner, site):
    target = _target(owner, site)
    site.app.file = b"tollgate-not-this-one\n"
    outcome = verification.verify(target)
    assert not outcome.verified and "does not contain this target's token" in outcome.error
    target.refresh_from_db()
    assert target.verified_at is None and "does not contain" in target.verification_error


@pytest.mark.django_db
def test_a_missing_file_is_refused(owner, site):
    target = _target(owner, site)
    outcome = verification.verify(target)
    assert not outcome.verified and "answered HTTP 404" in outcome.error
    assert f"no {HEADER} header" in outcome.error


@pytest.mark.django_db
def test_a_redirect_to_another_host_is_not_followed(owner, site, elsewhere):
    target = _target(owner, site)
    elsewhere_token = elsewhere.url(WELL_KNOWN_PATH)
    site.app.redirect_to = elsewhere_token
    outcome = verification.verify(target)
    assert not outcome.verified and "another origin: not followed" in outcome.error
    assert "127.0.0.66" not in outcome.error  # the peer's Location is not repeated
    assert elsewhere.counters.snapshot()["requests"] == 0


@pytest.mark.django_db
def test_a_same_origin_redirect_is_followed(owner, django_user_model):
    app = TokenSite()
    server = LocalServer(app=app, host="127.0.0.67").start()
    try:
        target = _target(owner, server)

        def moved(request):
            if request.path == WELL_KNOWN_PATH:
                app.paths.append(request.path)
                return 301, {"Location": "/token.txt"}, b""
            app.paths.append(request.path)
            return 200, {}, target.verification_token.encode()

        server.httpd.app = moved
        assert verification.verify(target).verified
        assert app.paths == [WELL_KNOWN_PATH, "/token.txt"]
    finally:
        server.stop()


@pytest.mark.django_db
def test_an_expired_verification_no_longer_counts(owner, site, settings):
    settings.TOLLGATE_VERIFICATION_MAX_AGE_DAYS = 30
    target = _target(owner, site)
    target.verified_at = timezone.now() - timedelta(days=31)
    target.save()
    assert verification.status(target) == verification.EXPIRED
    form = RunForm({"plain_url": site.url("/1k"), "arms": ["plain"], **FORM}, project=personal_project(owner))
    assert not form.is_valid() and "verification expired" in form.non_field_errors()[0]
    site.app.file = target.verification_token.encode()
    assert verification.verify(target).verified
    assert RunForm(
        {"plain_url": site.url("/1k"), "arms": ["plain"], **FORM}, project=personal_project(owner)
    ).is_valid()


FORM = {"users": 1, "spawn_rate": 10, "warmup_s": 0, "duration_s": 1}


@pytest.mark.django_db
def test_allow_listed_networks_skip_verification(owner, plain_server):
    target = _target(owner, plain_server)  # 127.0.0.1: allow-listed, outside TOLLGATE_VERIFY_NETWORKS
    assert verification.status(target) == verification.NOT_NEEDED
    assert RunForm(
        {"plain_url": plain_server.url("/1k"), "arms": ["plain"], **FORM}, project=personal_project(owner)
    ).is_valid()


@pytest.mark.django_db
def test_the_form_refuses_an_unverified_target(owner, site):
    form = RunForm({"plain_url": site.url("/1k"), "arms": ["plain"], **FORM}, project=personal_project(owner))
    assert not form.is_valid() and "must be verified" in form.non_field_errors()[0]
    _target(owner, site)
    form = RunForm({"plain_url": site.url("/1k"), "arms": ["plain"], **FORM}, project=personal_project(owner))
    assert not form.is_valid() and "is not verified" in form.non_field_errors()[0]
    assert site.counters.snapshot()["requests"] == 0  # the form itself sends nothing


def _run(owner, target, url):
    return services.create_run(owner, target, engine_config({"plain": url}, arrival_rate=60))


@pytest.mark.django_db(transaction=True)
def test_a_run_on_an_unverified_target_sends_nothing_but_the_check(owner, site):
    target = _target(owner, site)
    run = runner.execute_run(_run(owner, target, site.url("/1k")).pk)
    assert run.status == Run.Status.FAILED and "target not verified" in run.error
    # The well-known file, then the target URL once for the header: nothing else.
    assert site.app.paths == [WELL_KNOWN_PATH, "/1k"]


@pytest.mark.django_db(transaction=True)
def test_the_worker_checks_again_before_each_run(owner, site):
    target = _target(owner, site)
    site.app.file = target.verification_token.encode()
    assert verification.verify(target).verified
    site.app.file = b""  # the token is gone: the stored verification does not carry the next run
    run = runner.execute_run(_run(owner, target, site.url("/1k")).pk)
    assert run.status == Run.Status.FAILED and "answered HTTP 404" in run.error
    target.refresh_from_db()
    assert target.verified_at is None
    site.app.file = target.verification_token.encode()
    site.app.paths.clear()
    run = runner.execute_run(_run(owner, target, site.url("/1k")).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert site.app.paths[0] == WELL_KNOWN_PATH and site.app.paths.count("/1k") > 1


@pytest.mark.django_db
def test_the_verification_page_and_verify_now(client, owner, outsider, site):
    target = _target(owner, site)
    url = f"/targets/{target.code}/verification/"
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    assert client.post(url).status_code == 404
    client.force_login(owner)
    page = client.get(url).content.decode()
    assert target.verification_token in page and WELL_KNOWN_PATH in page and 'data-state="unverified"' in page
    site.app.file = target.verification_token.encode()
    assert client.post(url).status_code == 302
    assert 'data-state="verified"' in client.get(url).content.decode()


class BannerServer:
    """A non-HTTP service on ``host``: greets each connection with ``banner`` (an SSH server's first
    line) and closes it."""

    def __init__(self, host: str, banner: bytes) -> None:
        self.banner = banner
        self.sock = socket.create_server((host, 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(self.banner)
                time.sleep(0.1)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.mark.django_db
def test_verify_now_is_no_port_scanner(client, owner, monkeypatch):
    """A closed port, an open port that never answers and an SSH server read the same, on the page
    and in the audit log, and take the whole timeout: nothing the peer sent, nothing that tells one
    from another."""
    monkeypatch.setattr(lib, "TIMEOUT_S", 0.5)
    ssh = BannerServer("127.0.0.68", b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n")
    silent = socket.create_server(("127.0.0.69", 0))  # listens, never accepts
    with socket.socket() as probe:
        probe.bind(("127.0.0.70", 0))
        closed = probe.getsockname()[1]
    ports = {"ssh": ssh.port, "silent": silent.getsockname()[1], "closed": closed}
    hosts = {"ssh": "127.0.0.68", "silent": "127.0.0.69", "closed": "127.0.0.70"}
    client.force_login(owner)
    shown, logged = {}, {}
    try:
        for name in ports:
            url = f"http://{hosts[name]}:{ports[name]}/"
            target = services.get_or_create_target(personal_project(owner), name, url, "")
            started = time.monotonic()
            page = client.post(f"/targets/{target.code}/verification/", follow=True)
            # Two fetches (the file, the page), each failing no sooner than its timeout.
            assert time.monotonic() - started >= 2 * 0.5, name
            [message] = [str(m) for m in page.context["messages"]]
            event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TARGET_VERIFIED).latest("id")
            assert event.detail["verified"] is False
            target.refresh_from_db()
            # The address is the user's own text; everything after it must not depend on the peer.
            shown[name] = message.replace(url.rstrip("/"), "URL")
            logged[name] = event.detail["error"].replace(url.rstrip("/"), "URL")
            assert target.verification_error.replace(url.rstrip("/"), "URL") == logged[name]
    finally:
        ssh.stop()
        silent.close()
    assert len(set(shown.values())) == 1 and len(set(logged.values())) == 1, (shown, logged)
    for text in [*shown.values(), *logged.values()]:
        assert "SSH" not in text and "BadStatusLine" not in text and "Errno" not in text
    assert lib.NO_ANSWER in shown["ssh"]
