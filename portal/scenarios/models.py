"""Saved scenarios: a reusable measurement recipe of a target (the run form's cleaned values, a
version, budgets and a callback URL). It belongs to a project (``portal.projects``); who may see it
is decided by ``portal.projects.access`` (``portal.scenarios.access``)."""

from __future__ import annotations

from uuid import uuid4

from django.db import models


class Scenario(models.Model):
    """A saved, reusable measurement recipe. ``config`` holds the form's cleaned values."""

    code = models.UUIDField(default=uuid4, unique=True, editable=False)
    project = models.ForeignKey("projects.Project", models.CASCADE, related_name="scenarios")
    target = models.ForeignKey("targets.Target", models.CASCADE, related_name="scenarios")
    name = models.CharField(max_length=200)
    config = models.JSONField(default=dict)
    # Goes up with every edit; a run records the version it ran (Run.scenario_version).
    version = models.PositiveIntegerField(default=1)
    # {budget name: limit} (portal.lib.report.budgets): judged on every run of the scenario.
    budgets = models.JSONField(default=dict, blank=True)
    # A run whose cost interval lies further than this (% of the baseline's cost) above the pinned
    # baseline's is a regression, below it an improvement (portal.lib.watching.judgements, portal/judgements).
    # db_default too: rows written by code that predates the column (older migration states) get it.
    tolerance_pct = models.FloatField(default=10.0, db_default=10.0)
    # POSTed (signed like a webhook) when a run of the scenario ends; empty: no callback.
    callback_url = models.URLField(max_length=500, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "targets_scenario"  # where it was made: the model moved here, the table stayed
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="scenario_project_name_uniq"),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
