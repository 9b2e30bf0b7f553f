"""``tollgate run --mtls-url``: a server that asks for client certificates on a port of its own (Caddy,
as the demo's): the URL is stored on the target with the certificate, the ``tls_mtls`` arm goes there
and every other arm to the TLS URL — as the server's access log says — and the next run needs
neither option. A URL that is not https:// is refused before anything is stored."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from portal.lib.tls import certs
from portal.runs.models import Run
from tests import stacks

pytestmark = pytest.mark.django_db(transaction=True)


def run_cli(*args: str) -> Run:
    call_command("tollgate", "run", *args, stdout=io.StringIO(), stderr=io.StringIO())
    return Run.objects.latest("created")


def test_the_mtls_url_is_stored_and_the_next_run_needs_no_option(owner, tmp_path):
    ca = certs.make_ca()
    cert, key = certs.make_client_cert(ca, "cli-client", "ec")
    (tmp_path / "c.crt").write_text(cert)
    (tmp_path / "c.key").write_text(key)
    owner.is_superuser = True
    owner.save()
    quick = ["--users", "1", "--warmup", "0.2", "--duration", "1", "--arrival-rate", "20", "--insecure"]
    with stacks.start("caddy", client_ca_pem=ca[0], mtls_port=True) as server:
        base = ["--tls-url", server.tls_url(), "--arms", "tls_new,tls_mtls", *quick]
        pair = ["--client-cert", str(tmp_path / "c.crt"), "--client-key", str(tmp_path / "c.key")]
        with pytest.raises(CommandError, match="--mtls-url: Needs an https:// URL"):
            run_cli(*base, *pair, "--mtls-url", server.plain_url())
        assert not Run.objects.exists()
        first = run_cli(*base, *pair, "--mtls-url", server.mtls_url())
        second = run_cli(*base)  # the target holds the certificate and the mTLS URL
        served = [line for line in server.served() if line.tls and line.method == "GET"]
    for run in (first, second):
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert {arm["name"]: arm["url"] for arm in run.config["arms"]} == {
            "tls_new": server.tls_url(),
            "tls_mtls": server.mtls_url(),
        }
    assert first.target == second.target and first.target.mtls_url == server.mtls_url()
    # The server's account: the certificate reached the mTLS port only, and every request there had it.
    by_port = {
        port: [line.client for line in served if line.port == port] for port in {s.port for s in served}
    }
    assert set(by_port[server.mtls_port]) == {"cli-client"} and set(by_port[server.tls_port]) == {""}
