"""Labels of targets in lists: a target's name, with a part of its URL when names collide
(``portal.lib.report.targetnames``)."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet

from portal.lib.report import targetnames
from portal.lib.report.targetnames import display_names
from portal.targets.models import Target


def labels_of(targets: Iterable[Target]) -> dict:
    """``{target code: label}`` among already loaded targets (no query)."""
    return display_names((t.code, t.name, t.plain_url, t.tls_url) for t in targets)


def target_labels(scope: QuerySet[Target], names: Iterable[str] | None = None) -> dict:
    """``{target code: label}`` over the targets in ``scope`` (the requester's), or only those named
    ``names``: what may collide with them. One query."""
    targets = scope if names is None else scope.filter(name__in=set(names))
    return display_names(targets.values_list("code", "name", "plain_url", "tls_url"))


def run_title(run, label: str | None = None) -> str:
    """A run's title (``portal.lib.report.targetnames.run_title``): its target's ``label`` (default: the
    target's name), with the paths the run requested when it was given its own."""
    config = run.config or {}
    urls = [arm.get("url") for arm in config.get("arms", [])]
    name = run.target.name
    return targetnames.run_title(label or name, name, urls, config.get("paths"))
