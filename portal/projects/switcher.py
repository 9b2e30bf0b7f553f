"""The project switcher's rows (every page's header): a user's memberships with their projects, kept
in the cache per user, so a page read costs no query for them.

A row is ``(project code, project name, role, personal_of id)``. Any change of a membership (made,
role changed, removed) or of a project (renamed, deleted) drops the rows of the users concerned, at
once and again when the transaction commits (a page read between the two cannot keep stale rows).
The rows carry the user's ``date_joined``: rows of an account of the same id in another database
(a test database made anew) are never taken for this one's. They expire after ``TTL_S`` anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from portal.projects.models import Membership, Project

TTL_S = 300


@dataclass(frozen=True)
class SwitcherProject:
    code: str
    name: str
    personal_of_id: int | None


@dataclass
class SwitcherRow:
    project: SwitcherProject
    role: str
    is_current: bool = False


def _key(user_id: int) -> str:
    return f"switcher:{connection.settings_dict['NAME']}:{user_id}"


def rows_for(user) -> list[SwitcherRow]:
    """The user's memberships with their projects, by project name (as the header lists them)."""
    joined = user.date_joined.isoformat()
    kept = cache.get(_key(user.pk))
    if kept is None or kept[0] != joined:
        found = Membership.objects.filter(user=user).select_related("project").order_by("project__name")
        rows = [(str(m.project.code), m.project.name, m.role, m.project.personal_of_id) for m in found]
        kept = (joined, rows)
        cache.set(_key(user.pk), kept, TTL_S)
    return [
        SwitcherRow(SwitcherProject(code, name, personal), role) for code, name, role, personal in kept[1]
    ]


def rows_marked(user, chosen: str | None) -> list[SwitcherRow]:
    """``rows_for`` with the current project marked: the one ``chosen`` (the session's), else the
    user's personal project."""
    found = rows_for(user)
    if not any(str(m.project.code) == chosen for m in found):
        chosen = next((str(m.project.code) for m in found if m.project.personal_of_id == user.pk), None)
    for m in found:
        m.is_current = str(m.project.code) == chosen
    return found


def forget(user_ids) -> None:
    keys = [_key(user_id) for user_id in user_ids]
    cache.delete_many(keys)
    transaction.on_commit(lambda: cache.delete_many(keys))


@receiver([post_save, post_delete], sender=Membership, dispatch_uid="switcher-membership")
def _membership_changed(sender, instance: Membership, **kwargs) -> None:
    forget([instance.user_id])


@receiver([post_save, post_delete], sender=Project, dispatch_uid="switcher-project")
def _project_changed(sender, instance: Project, **kwargs) -> None:
    forget(Membership.objects.filter(project_id=instance.pk).values_list("user_id", flat=True))
