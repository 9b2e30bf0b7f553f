"""``/api/v1/scenarios`` lists (GET) and creates (POST) the token's project's saved scenarios;
``/api/v1/scenarios/<id>`` reads (GET) and changes (PATCH) one.

Saved through the CLI's service (``portal.runs.starting.save_scenario``): the run keys are checked
as a run's (the run form), the scenario's own — ``name``, ``budgets``, ``callback_url``,
``tolerance_pct`` — with the scenario page's bounds and words (``portal.scenarios.forms``,
``portal.lib.watching.judgements``). A change keeps what its body leaves out (sealed secrets
included) and raises the scenario's version, as its edit page does; both are audited as that page's
saves are."""

from __future__ import annotations

from django.db import IntegrityError
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import serializers as s
from portal.api.errors import Refused
from portal.api.schedules import SCENARIO_ID, scenario_of
from portal.api.views import Page, errors
from portal.lib.watching import judgements as judge
from portal.runs.starting import RunRefused, save_scenario
from portal.scenarios.auditing import scenario_saved
from portal.scenarios.forms import ScenarioForm
from portal.scenarios.models import Scenario


def scenario_in_fields() -> dict[str, serializers.Field]:
    """``ScenarioIn``'s fields: the scenario's name, the keys of an inline run (``InlineRunIn``, with
    ``budgets``), its callback URL and its regression tolerance."""
    return {
        "name": serializers.CharField(max_length=200, help_text="Unique within the project."),
        **s.inline_run_fields(),
        "callback_url": serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=500,
            help_text="POSTed, signed, when a run of the scenario ends; the outbound address policy "
            'applies ("" for none).',
        ),
        "tolerance_pct": serializers.FloatField(
            required=False,
            min_value=0,
            max_value=judge.MAX_TOLERANCE_PCT,
            help_text="Regression tolerance against the pinned baseline, % of its cost (default 10; "
            "docs/watching.md).",
        ),
    }


# What a scenario's POST takes (its PATCH: any of these; what it leaves out is kept).
ScenarioIn = type("ScenarioIn", (serializers.Serializer,), scenario_in_fields())


def _body(request: Request) -> dict:
    if not isinstance(request.data, dict):
        raise Refused({"non_field_errors": ["Expected a JSON object."]})
    return dict(request.data)


def checked_name(project, value, scenario: Scenario | None = None) -> str:
    """``value`` as the scenario page takes a name (length, text, unique in the project), or a 400."""
    if not isinstance(value, str):
        raise Refused({"name": ["Expected a string."]})
    form = ScenarioForm({"name": value}, scenario=scenario or Scenario(project=project))
    if not form.is_valid() and "name" in form.errors:  # the page's other fields are optional
        raise Refused({"name": form.errors["name"]})
    return form.cleaned_data["name"]


def saved(request: Request, data: dict, name: str, scenario: Scenario | None = None) -> Scenario:
    project = request.auth.project
    before = scenario.version if scenario is not None else None
    try:
        scenario = save_scenario(project, name, data, scenario=scenario)
    except RunRefused as refused:
        raise Refused(refused.errors) from None
    except IntegrityError:  # the name was taken meanwhile: say so as the check does
        checked_name(project, name, scenario)
        raise
    scenario_saved(request, scenario, before, via="api")
    return scenario


def _answer(scenario: Scenario, code: int = status.HTTP_200_OK, **headers) -> Response:
    return Response(s.ScenarioOut(scenario).data, status=code, headers=headers)


class Scenarios(ListAPIView):
    serializer_class = s.ScenarioOut
    pagination_class = Page

    def get_queryset(self) -> QuerySet[Scenario]:
        return (
            Scenario.objects.filter(project_id=self.request.auth.project_id)
            .select_related("target")
            .order_by("name", "pk")
        )

    @extend_schema(
        operation_id="scenarios_list", responses={200: s.ScenarioOut(many=True), **errors(403, 404)}
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="scenarios_create",
        summary="Save a scenario: a run's keys, its name, budgets, callback URL and tolerance",
        request=ScenarioIn,
        responses={201: s.ScenarioOut, **errors(400, 403)},
    )
    def post(self, request: Request) -> Response:
        data = _body(request)
        if "name" not in data:
            raise Refused({"name": ["This field is required."]})
        scenario = saved(request, data, checked_name(request.auth.project, data.pop("name")))
        location = request.build_absolute_uri(reverse("api-scenario", args=[scenario.code]))
        return _answer(scenario, status.HTTP_201_CREATED, Location=location)


class ScenarioDetail(APIView):
    @extend_schema(
        operation_id="scenarios_retrieve",
        parameters=[SCENARIO_ID],
        responses={200: s.ScenarioOut, **errors(403, 404)},
    )
    def get(self, request: Request, id) -> Response:
        return _answer(scenario_of(request, id))

    @extend_schema(
        operation_id="scenarios_update",
        summary="Change a scenario (a new version): what the body leaves out is kept",
        parameters=[SCENARIO_ID],
        request=ScenarioIn,
        responses={200: s.ScenarioOut, **errors(400, 403, 404)},
    )
    def patch(self, request: Request, id) -> Response:
        scenario = scenario_of(request, id)
        data = _body(request)
        project = request.auth.project
        name = checked_name(project, data.pop("name"), scenario) if "name" in data else scenario.name
        return _answer(saved(request, data, name, scenario))
