"""The permission matrix: every URL pattern of the portal × {owner, member, viewer of project A, a
member of project B only, anonymous} × {GET, POST}, against objects of project A while project B's
exist too. A new URL without a row here fails ``test_every_url_has_a_row``."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from portal.runs.access import SESSION_KEY

# Patterns not ours to check here, with the reason.
NOT_OURS = {
    "admin": "Django admin: staff only, its own permission system",
    "allauth": "django-allauth's account pages (accounts/): the requester's own account, or public by "
    "design (login, sign-up, reset); tests/accounts checks them",
}
ROLES = ("owner", "member", "viewer", "outsider", "anonymous")
OK, MOVED, FORBIDDEN, MISSING, NOT_ALLOWED = 200, 302, 403, 404, 405


def row(get: tuple, post: tuple) -> dict:
    """Statuses for owner, member, viewer, outsider (anonymous is always sent to the login page)."""
    return {
        "GET": dict(zip(ROLES, (*get, MOVED), strict=True)),
        "POST": dict(zip(ROLES, (*post, MOVED), strict=True)),
    }


READ = (OK, OK, OK, MISSING)
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
    "targets-delete": (
        lambda a: reverse("targets-delete", args=[a.target.code]),
        row((OK, FORBIDDEN, FORBIDDEN, MISSING), (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
    "scenarios-delete": (
        lambda a: reverse("scenarios-delete", args=[a.scenario.code]),
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
    "projects-switch": (lambda a: reverse("projects-switch"), row(GET_ONLY, (MOVED, MOVED, MOVED, MISSING))),
    "projects-members": (
        lambda a: reverse("projects-members", args=[a.project.code]),
        row(READ, (OK, FORBIDDEN, FORBIDDEN, MISSING)),
    ),
}


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
