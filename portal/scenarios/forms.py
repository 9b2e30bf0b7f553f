"""The scenario page's own fields beside the run form's: name, budgets, callback URL."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.lib.report import budgets
from portal.lib.watching import judgements as judge
from portal.scenarios.models import Scenario
from portal.validators import check_callback_url, validate_text

PREFIX = "budget_"


class ScenarioForm(forms.Form):
    name = forms.CharField(max_length=200, validators=[validate_text])
    callback_url = forms.CharField(
        label="Callback URL",
        max_length=500,
        required=False,
        help_text="Optional: POSTed (signed like a webhook) with the costs and budget verdicts when a run "
        "of this scenario ends. The outbound address policy applies, as to targets.",
    )

    tolerance_pct = forms.FloatField(
        label="Regression tolerance (%)",
        min_value=0,
        max_value=judge.MAX_TOLERANCE_PCT,
        required=False,
        # One wording wherever a tolerance is set: this page, the CLI and the API (runs.starting).
        error_messages={key: judge.TOLERANCE_ERROR for key in ("invalid", "min_value", "max_value")},
        help_text="Empty: unchanged (10 for a new scenario). A run is a regression (an improvement) "
        "when a cost's 95% interval lies further than this share of the baseline's cost above "
        "(below) the pinned baseline's interval.",
    )

    def __init__(self, *args, scenario: Scenario, **kwargs) -> None:
        self.scenario = scenario
        super().__init__(*args, **kwargs)
        for budget in budgets.BUDGETS.values():
            field_class = forms.IntegerField if budget.integer else forms.FloatField
            self.fields[PREFIX + budget.name] = field_class(
                label=f"{budget.name} ({budget.unit})",
                required=False,
                min_value=0,
                max_value=budgets.MAX_LIMIT,
                help_text=f"Max {budget.what}. Empty: no budget.",
            )

    @classmethod
    def initial_of(cls, scenario: Scenario) -> dict:
        initial = {
            "name": scenario.name,
            "callback_url": scenario.callback_url,
            "tolerance_pct": scenario.tolerance_pct,
        }
        initial.update({PREFIX + name: limit for name, limit in (scenario.budgets or {}).items()})
        return initial

    def budget_fields(self) -> list:
        return [self[PREFIX + name] for name in budgets.NAMES]

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        taken = Scenario.objects.filter(project_id=self.scenario.project_id, name=name).exclude(
            pk=self.scenario.pk
        )
        if taken.exists():
            raise ValidationError("Another scenario of this project has this name.")
        return name

    def clean_callback_url(self) -> str:
        value = self.cleaned_data["callback_url"].strip()
        return check_callback_url(value) if value else ""

    def budgets(self) -> dict:
        """The budgets typed (empty fields: none), checked like the CLI's and the API's."""
        data = self.cleaned_data
        return budgets.clean(
            {name: data[PREFIX + name] for name in budgets.NAMES if data.get(PREFIX + name) is not None}
        )
