"""The permission matrix: every URL pattern of the portal × {owner, member, viewer of project A, a
member of project B only, anonymous} × {GET, POST}, against objects of project A while project B's
exist too. A new URL without a row here fails ``test_every_url_has_a_row``."""

from __future__ import annotations

import functools

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from portal.api import tokens
from portal.lib.tls import certs, clientcerts
from portal.projects.access import SESSION_KEY
from portal.projects.models import Invitation
from portal.sharing.models import ShareLink
from portal.sharing.services import create_share
from portal.targets.clientcerts import save_client_cert
from portal.targets.models import ClientCertificate

# Patterns not ours to check here, with the reason.
NOT_OURS = {
    "admin": "Django admin: staff only, its own permission system",
    "allauth": "django-allauth's account pages (accounts/): the requester's own account, or public by "
    "design (login, sign-up, reset); tests/accounts checks them",
    "hooks-receive": "a scenario's webhook (POST /hooks/<id>): no session; the unguessable id and the HMAC "
    "signature are the credentials; tests/hooks/test_receive.py checks unknown ids, forged, stale and "
    "replayed calls over Gunicorn",
    "signing-keys": "/.well-known/tollgate-report-keys.json: the public report-signing keys, public by "
    "design (auditors without an account verify with them); tests/signing/test_keys_endpoint checks it "
    "needs no login, serves only public keys and refuses POST",
    "signing-verifier": "/.well-known/tollgate-verify-report.py: the offline verifier "
    "(portal/lib/security/signing.py as it is), public by design like the keys; "
    "tests/signing/test_keys_endpoint checks it needs no login and refuses POST",
    # Share links: public capability URLs, the token is the credential (no login, no role). Wrong
    # token 404, revoked/expired 410, compare vs run links: tests/sharing/test_links.py.
    "sharing-view": "public share page /s/<token>/ (capability URL): tests/sharing/test_links.py",
    "sharing-report-json": "public share link's report JSON (capability URL): tests/sharing/test_links.py",
    "sharing-report-csv": "public share link's report CSV (capability URL): tests/sharing/test_links.py",
    "sharing-status": "public share link's status JSON for CI (capability URL): tests/sharing/test_links.py",
    "sharing-compare-json": "public compare share link's JSON (capability URL): tests/sharing/test_links.py",
    "sharing-compare-run-json": "public compare share link's report JSON of one of its runs (capability "
    "URL): tests/sharing/test_links.py",
    **{
        name: "JSON API with bearer tokens only (a session is refused: 401): tests/api/test_scopes.py checks "
        "another project's objects (404), read scope and viewer role on POST (403), unknown, revoked and "
        "removed-member tokens (401)"
        for name in (
            "api-runs",
            "api-run",
            "api-run-report",
            "api-run-cancel",
            "api-run-shares",
            "api-run-baseline",
            "api-targets",
            "api-scenarios",
        )
    },
    "api-schema": "the OpenAPI schema, public by design (it describes the API, holds no data); "
    "tests/api/test_schema.py",
    "api-docs": "the API docs page (Swagger UI on the schema), public like it; tests/e2e/test_api_docs.py",
    "api-not-found": "JSON 404 for any other path under /api/v1/; tests/api/test_runs.py",
    "api-scenario": "JSON API with bearer tokens only (a session is refused: 401), like the other "
    "/api/v1/ endpoints: tests/api/test_scenarios.py checks another project's scenario (404) and a read "
    "token's or a viewer's PATCH (403)",
    "api-scenario-schedule": "JSON API with bearer tokens only (a session is refused: 401), like the "
    "other /api/v1/ endpoints: tests/schedules/test_interfaces.py checks another project's scenario "
    "(404) and a read token's PUT and DELETE (403)",
    "ops-readyz": "/readyz, the readiness probe: public by design (load balancers, docker-compose), no "
    "session or role; its status follows the database, broker, cache and run workers (200 or 503), "
    "not the requester: tests/ops/test_probes.py checks each failing check and that it is GET only",
    "ops-metrics": "/metrics, Prometheus: no session or role, the client's network is the rule (404 "
    "when TOLLGATE_METRICS_NETWORKS is empty, 403 outside it, X-Forwarded-For only behind trusted "
    "proxies): tests/ops/test_metrics.py",
}
ROLES = ("owner", "member", "viewer", "outsider", "anonymous")
OK, MOVED, INVALID, FORBIDDEN, MISSING, NOT_ALLOWED = 200, 302, 400, 403, 404, 405


def row(get: tuple, post: tuple) -> dict:
    """Statuses for owner, member, viewer, outsider (anonymous is always sent to the login page)."""
    return {
        "GET": dict(zip(ROLES, (*get, MOVED), strict=True)),
        "POST": dict(zip(ROLES, (*post, MOVED), strict=True)),
    }


def everyone(get: int, post: int) -> dict:
    """One status per method for every role, anonymous too (public URLs: no login page)."""
    return {"GET": dict.fromkeys(ROLES, get), "POST": dict.fromkeys(ROLES, post)}


READ = (OK, OK, OK, MISSING)


def owners_token(a) -> str:
    """A token of A's owner: only its own user may revoke it (everyone else: 404)."""
    owner = a.project.memberships.get(role="owner").user
    token, _ = tokens.issue(owner, a.project, scope="read", name="matrix")
    return str(token.code)


GET_ONLY = (NOT_ALLOWED,) * 4
# name → (how to build the URL from project A's objects, expected statuses)
MATRIX = {
    "": (lambda a: "/", row((MOVED,) * 4, (MOVED,) * 4)),
    "runs-list": (lambda a: reverse("runs-list"), row((OK,) * 4, GET_ONLY)),
    # The outsider's current project is their own (the session's A is not theirs): they may start runs there.
    "runs-new": (lambda a: reverse("runs-new"), row((OK, OK, FORBIDDEN, OK), (OK, OK, FORBIDDEN, OK))),
    "runs-detail": (lambda a: reverse("runs-detail", args=[a.runs[0].code]), row(READ, GET_ONLY)),
    "runs-progress": (lambda a: reverse("runs-progress", args=[a.runs[0].code]), row(READ, GET_ONLY)),
    "runs-report-json": (lambda a: reverse("runs-report-json", args=[a.runs[0].code]), row(READ, GET_ONLY)),
    "runs-report-csv": (lambda a: reverse("runs-report-csv", args=[a.runs[0].code]), row(READ, GET_ONLY)),
    # POST without confirm on a finished run: "already succeeded", back to the run.
    "runs-cancel": (
        lambda a: reverse("runs-cancel", args=[a.runs[0].code]),
        row((MOVED, MOVED, FORBIDDEN, MISSING), (MOVED, MOVED, FORBIDDEN, MISSING)),
    ),
    "runs-pin-baseline": (
        lambda a: reverse("runs-pin-baseline", args=[a.runs[0].code]),
        row(GET_ONLY, (MOVED, MOVED, FORBIDDEN, MISSING)),
    ),
    # Started by A's owner: the member may not delete it (their own runs, yes: test_deletion).
    "runs-delete": (
        lambda a: reverse("runs-delete", args=[a.runs[0].code]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    "runs-compare": (
        lambda a: f"{reverse('runs-compare')}?runs={a.runs[0].code},{a.runs[1].code}",
        row(READ, GET_ONLY),
    ),
    "target-trend": (lambda a: reverse("target-trend", args=[a.target.code]), row(READ, GET_ONLY)),
    "targets-list": (lambda a: reverse("targets-list"), row((OK,) * 4, (OK, OK, FORBIDDEN, OK))),
    "target-ssh": (
        lambda a: reverse("target-ssh", args=[a.target.code]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    "target-ssh-forget": (
        lambda a: reverse("target-ssh-forget", args=[a.target.code]),
        row(GET_ONLY, (MOVED, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    "target-ssh-delete": (
        lambda a: reverse("target-ssh-delete", args=[a.target.code]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    # Every role reads the public facts; members and owners add (an empty POST: the form's errors).
    "target-client-certs": (
        lambda a: reverse("target-client-certs", args=[a.target.code]),
        row(READ, (OK, OK, FORBIDDEN, MISSING)),
    ),
    # Forgetting is the owners' (the confirmation page on GET and on a POST without confirm).
    "target-client-cert-forget": (
        lambda a: reverse("target-client-cert-forget", args=[_client_cert(a).target.code, "ecdsa"]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    "targets-delete": (
        lambda a: reverse("targets-delete", args=[a.target.code]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    # Members and owners correct a target, as they may add one; POST without fields: the form with its
    # errors, nothing saved (tests/targets/test_edit.py edits for real).
    "targets-edit": (
        lambda a: reverse("targets-edit", args=[a.target.code]),
        row((OK, OK, FORBIDDEN, MISSING), (OK, OK, FORBIDDEN, MISSING)),
    ),
    "scenarios-delete": (
        lambda a: reverse("scenarios-delete", args=[a.scenario.code]),
        row((OK, OK, FORBIDDEN, MISSING), (OK, OK, FORBIDDEN, MISSING)),
    ),
    # The outsider's current project is their own: they see its (empty) list.
    "scenarios-list": (lambda a: reverse("scenarios-list"), row((OK,) * 4, GET_ONLY)),
    "scenarios-detail": (lambda a: reverse("scenarios-detail", args=[a.scenario.code]), row(READ, GET_ONLY)),
    # POST without fields: the form with its errors, nothing saved.
    "scenarios-edit": (
        lambda a: reverse("scenarios-edit", args=[a.scenario.code]),
        row((OK, OK, FORBIDDEN, MISSING), (OK, OK, FORBIDDEN, MISSING)),
    ),
    "projects-list": (lambda a: reverse("projects-list"), row((OK,) * 4, (OK,) * 4)),
    # Everyone logged in may open it; it lists only the events of projects they own (test_audit).
    "audit-list": (lambda a: reverse("audit-list"), row((OK,) * 4, GET_ONLY)),
    # Verify now sends one request to the target (a closed loopback port here): members and owners.
    "target-verification": (
        lambda a: reverse("target-verification", args=[a.target.code]),
        row(READ, (MOVED, MOVED, FORBIDDEN, MISSING)),
    ),
    # A scenario's webhook page: members and owners; POST without an action (no webhook yet): back to it.
    "hooks-scenario": (
        lambda a: reverse("hooks-scenario", args=[a.scenario.code]),
        row((OK, OK, FORBIDDEN, MISSING), (MOVED, MOVED, FORBIDDEN, MISSING)),
    ),
    "projects-switch": (lambda a: reverse("projects-switch"), row(GET_ONLY, (MOVED, MOVED, MOVED, MISSING))),
    # The current project's share links (the outsider's own project: empty, but theirs to see).
    "sharing-list": (lambda a: reverse("sharing-list"), row((OK,) * 4, GET_ONLY)),
    # GET: the form; POST (no fields: the defaults) creates a link and shows it once.
    "sharing-create": (
        lambda a: f"{reverse('sharing-create')}?run={a.runs[0].code}",
        row((OK, OK, FORBIDDEN, MISSING), (OK, OK, FORBIDDEN, MISSING)),
    ),
    # A link created by A's owner: they (or another owner) may revoke it, not the member.
    "sharing-revoke": (
        lambda a: reverse("sharing-revoke", args=[_share_link(a).code]),
        row(GET_ONLY, (MOVED, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    # Everyone's own tokens; an empty POST re-shows the form with its errors.
    "tokens-list": (lambda a: reverse("tokens-list"), row((OK,) * 4, (OK,) * 4)),
    "tokens-revoke": (
        lambda a: reverse("tokens-revoke", args=[owners_token(a)]),
        row(GET_ONLY, (MOVED, MISSING, MISSING, MISSING)),
    ),
    "projects-members": (
        lambda a: reverse("projects-members", args=[a.project.code]),
        row(READ, (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    # An invitation to A for the outsider's name: only that account answers it (declined here, so
    # the rows after it see the same memberships); everyone else: 404.
    "projects-invitation": (
        lambda a: reverse("projects-invitation", args=[_invitation(a).code, "decline"]),
        row(GET_ONLY, (MISSING, MISSING, MISSING, MOVED)),
    ),
    # A scenario's schedule page: members and owners (viewers see the schedule on the scenario page
    # only); POST without fields: the form with its errors, nothing scheduled.
    "schedules-edit": (
        lambda a: reverse("schedules-edit", args=[a.scenario.code]),
        row((OK, OK, FORBIDDEN, MISSING), (INVALID, INVALID, FORBIDDEN, MISSING)),
    ),
    # The current project's alert channels: viewers read, members add (an empty POST: the form's
    # errors, nothing added). The outsider's current project is their own, where they are a member.
    "alerts-list": (
        lambda a: reverse("alerts-list"),
        row((OK,) * 4, (INVALID, INVALID, FORBIDDEN, INVALID)),
    ),
    # The liveness probe: public, no database, GET only.
    "ops-healthz": (lambda a: reverse("ops-healthz"), everyone(OK, NOT_ALLOWED)),
    # The operators' page: staff only, everyone else 404 (none of these users is staff;
    # tests/ops/test_operators.py shows it to staff).
    "ops-operators": (lambda a: reverse("ops-operators"), row((MISSING,) * 4, GET_ONLY)),
}


def _invitation(a):
    return Invitation.objects.get_or_create(
        project=a.project, username="outsider", defaults={"role": "viewer"}
    )[0]


@functools.cache
def _ecdsa_pair() -> tuple[str, str]:
    return certs.make_client_cert(certs.make_ca(), "matrix", "ec")


def _client_cert(a):
    """A's target's ECDSA client certificate (stored once per test)."""
    found = ClientCertificate.objects.filter(target=a.target, key_type="ecdsa").first()
    return found or save_client_cert(a.target, clientcerts.load_pair(*_ecdsa_pair()))


def _share_link(a):
    """A's share link of its first run, made by A's owner (once per test)."""
    found = ShareLink.objects.filter(run=a.runs[0], created_by=a.runs[0].owner).first()
    return found or create_share(a.runs[0].owner, run=a.runs[0])[0]


def _patterns(resolvers=None, prefix: str = "") -> list[tuple[str, str]]:
    """(name, route) of every pattern of the portal, the admin's namespace left out whole."""
    found = []
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern) == "accounts/":
                found.append(("allauth", prefix + str(entry.pattern)))
                continue
            if entry.namespace == "admin":
                found.append(("admin", prefix + str(entry.pattern)))
                continue
            found += _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            found.append((entry.name or prefix + str(entry.pattern), prefix + str(entry.pattern)))
    return found


def test_every_url_has_a_row():
    missing = [(name, route) for name, route in _patterns() if name not in MATRIX and name not in NOT_OURS]
    assert missing == [], f"add these URL patterns to MATRIX (or NOT_OURS with a reason): {missing}"
    stale = [name for name in MATRIX if name not in {name for name, _ in _patterns()}]
    assert stale == [], f"rows for URL patterns that no longer exist: {stale}"


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("role", ROLES)
def test_matrix(client, world, role, method):
    a = world["a"]
    if role != "anonymous":
        client.force_login(world["users"][role])
        session = client.session
        session[SESSION_KEY] = str(a.project.code)  # everyone tries A as their current project
        session.save()
    wrong = []
    for name, (url_of, expected) in MATRIX.items():
        url = url_of(a)
        data = {"project": str(a.project.code)} if name == "projects-switch" else {}
        response = client.get(url) if method == "GET" else client.post(url, data)
        if response.status_code != expected[method][role]:
            wrong.append(
                f"{method} {url} ({name}) as {role}: {response.status_code}, want {expected[method][role]}"
            )
    assert wrong == []
    # Nothing of either project was deleted by confirmation-less POSTs.
    for side in (a, world["b"]):
        assert side.project.runs.count() == 2 and side.project.scenarios.count() == 1
        assert side.target.__class__.objects.filter(pk=side.target.pk, ssh__isnull=False).exists()
    assert ClientCertificate.objects.filter(target=a.target).count() == 1  # not forgotten, none added


@pytest.mark.django_db
def test_lists_and_exports_show_only_the_current_project(client, world):
    a, b = world["a"], world["b"]
    client.force_login(world["users"]["outsider"])
    session = client.session
    session[SESSION_KEY] = str(b.project.code)
    session.save()
    runs = client.get(reverse("runs-list")).content.decode()
    targets = client.get(reverse("targets-list")).content.decode()
    assert str(b.runs[0].code) in runs and str(a.runs[0].code) not in runs
    assert str(b.target.code) in targets and str(a.target.code) not in targets
    mixed = f"{reverse('runs-compare')}?runs={b.runs[0].code},{a.runs[0].code}"
    assert client.get(mixed).status_code == MISSING
