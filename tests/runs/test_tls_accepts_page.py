"""The run page and the report JSON show what the server accepts (groups, signature algorithms, the
client-certificate request) from the TLS facts of a real probe against a real server: a pyOpenSSL
server on the bundled OpenSSL with the hybrid group on, both certificates and a client-certificate
request (``tests/workers/test_tls_accepts.py``)."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from portal.runs.models import Run
from tests.runs.factories import make_run
from tests.workers.test_tls_accepts import BundledServer, certs  # noqa: F401 - certs: a fixture
from workers.engine.tls.facts import handshake_facts

pytestmark = pytest.mark.django_db


def test_the_page_and_the_json_show_groups_signatures_client_certificate_and_libraries(client, owner, certs):  # noqa: F811
    with BundledServer(certs, client_ca=certs["ca"][0]) as server:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    assert facts["error"] is None
    run = make_run(owner, arms={"plain": [300] * 50, "tls": [400] * 50})
    Run.objects.filter(pk=run.pk).update(tls_info=facts | {"url": f"https://127.0.0.1:{server.port}/"})
    client.force_login(owner)
    page = html.unescape(client.get(reverse("runs-detail", args=[run.code])).content.decode())
    groups = page[page.index('id="tls-groups"') :]
    groups = groups[: groups.index("</tr>")]
    accepted, refused = groups.split("refused by the server:")
    assert '<code>X25519MLKEM768</code> <span class="badge">hybrid post-quantum</span>' in accepted
    assert "<code>x25519</code>" in accepted and "<code>secp256r1</code>" in accepted
    assert "P-384" in refused and "X25519MLKEM768" not in refused
    sigalgs = page[page.index('id="tls-sigalgs"') :]
    sigalgs = sigalgs[: sigalgs.index("</tr>")]
    assert "<code>ecdsa_secp256r1_sha256</code> (EC certificate)" in sigalgs
    assert "<code>rsa_pss_rsae_sha256</code> (RSA certificate)" in sigalgs
    cert_row = page[page.index('id="tls-client-cert"') :]
    cert_row = cert_row[: cert_row.index("</tr>")]
    assert "requested, optional: the server went on without one" in cert_row
    assert "<code>CN=Tollgate Test Client CA</code>" in cert_row
    # Both libraries named with their OpenSSL: the first handshake's and the accept probe's.
    bundled = facts["accept_probe"]["tls_library"]
    assert facts["tls_library"]["openssl"] in page
    assert f"on the bundled library ({bundled['openssl']}, {bundled['binding']})" in page
    # The report JSON carries the same facts.
    data = client.get(reverse("runs-report-json", args=[run.code])).json()
    info = data["tls_info"]
    assert info["groups"] == facts["groups"] and info["signature_algorithms"] == facts["signature_algorithms"]
    assert info["client_cert_requested"] is True and info["client_ca_names"] == ["CN=Tollgate Test Client CA"]
    assert info["accept_probe"]["tls_library"]["choice"] == "bundled"
    assert info["tls_library"]["binding"] == "openssl s_client"
