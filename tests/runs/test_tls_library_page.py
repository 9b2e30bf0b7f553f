"""The run page's method and provenance section names the run's TLS library (``run.engine.tls_library``,
from the engine's hello); a run from before the option ran on the system library and says so."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from portal.runs import reporting
from portal.runs.models import Run
from portal.signing.services import freeze
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db
SYSTEM_OPENSSL = "OpenSSL 3.0.22 25 Aug 2026"
BUNDLED = {"choice": "bundled", "openssl": "OpenSSL 4.0.0 14 Apr 2026", "binding": "pyOpenSSL 26.2.0"}


def run_page(client, owner, engine: dict) -> tuple[str, dict]:
    """The run page and the report JSON of a finished run whose engine reported ``engine``."""
    run = make_run(owner)
    Run.objects.filter(pk=run.pk).update(engine=engine)
    run = Run.objects.get(pk=run.pk)
    reporting.store_summary(run)
    freeze(run)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    return page, client.get(reverse("runs-report-json", args=[run.code])).json()


def library_shown(client, owner, engine: dict) -> tuple[str, dict | None]:
    page, report = run_page(client, owner, engine)
    shown = re.search(r'<dd id="tls-library">(.*?)</dd>', page).group(1)
    return shown, report["run"]["engine"].get("tls_library")


def test_a_bundled_run_names_pyopenssl_and_its_openssl(client, owner):
    shown, recorded = library_shown(client, owner, {"openssl": SYSTEM_OPENSSL, "tls_library": BUNDLED})
    assert recorded == BUNDLED
    assert shown.startswith("bundled: pyOpenSSL 26.2.0 on OpenSSL 4.0.0 14 Apr 2026")


def test_a_run_from_before_the_option_shows_the_system_library(client, owner):
    shown, recorded = library_shown(client, owner, {"openssl": SYSTEM_OPENSSL})
    assert recorded is None
    assert shown.startswith(f"system: ssl on {SYSTEM_OPENSSL}")


def test_the_versions_name_the_http2_library_when_the_engine_reported_it(client, owner):
    """``run.engine.http2`` (the HTTP/2 arms' library, from the hello) is on the Versions line; a run
    from before it says nothing of it."""
    engine = {"openssl": SYSTEM_OPENSSL, "http2": "libnghttp2 1.52.0"}
    cases = (
        (engine, "HTTP/2 on libnghttp2 1.52.0"),
        ({"openssl": SYSTEM_OPENSSL}, None),
        ({"http2": "jh2 5.0.15"}, "HTTP/2 on jh2 5.0.15"),  # no OpenSSL reported: no empty field between
    )
    for recorded, expected in cases:
        page, _ = run_page(client, owner, recorded)
        versions = re.search(r'<dd id="engine-versions">(.*?)</dd>', page, re.S).group(1)
        assert versions.startswith("Tollgate ") and not re.search(r"·\s*·", versions), versions
        assert (f" · {SYSTEM_OPENSSL}" in versions) == ("openssl" in recorded)
        if expected:
            assert versions.endswith(" · " + expected), versions
        else:
            assert "HTTP/2" not in versions, versions
