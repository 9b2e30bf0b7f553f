"""A run of a scenario judged against its target's pinned baseline (``portal.lib.watching.judgements``)."""

from __future__ import annotations

from django.db import models


class Judgement(models.Model):
    class Status(models.TextChoices):
        REGRESSION = "regression"
        IMPROVEMENT = "improvement"
        UNCHANGED = "unchanged"
        UNKNOWN = "unknown"  # no cost both sides could be judged on (no interval, not judged)

    run = models.OneToOneField("runs.Run", models.CASCADE, related_name="judgement")
    scenario = models.ForeignKey("scenarios.Scenario", models.CASCADE, related_name="judgements")
    # The baseline it was judged against (the target's pin at the time; it may be unpinned since).
    baseline = models.ForeignKey("runs.Run", models.SET_NULL, null=True, related_name="+")
    status = models.CharField(max_length=12, choices=Status.choices)
    tolerance_pct = models.FloatField()
    # portal.lib.watching.judgements.judge(): {"status", "baseline", "tolerance_pct", "costs", "changes"}.
    result = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            # The scenario page's series: a scenario's newest judgements.
            models.Index(fields=["scenario", "-created"], name="judgement_scenario_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.status}"
