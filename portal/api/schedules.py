"""``/api/v1/scenarios/<id>/schedule``: read (GET), set (PUT) or remove (DELETE) a saved scenario's
schedule, through the same service as the portal and the CLI (``portal.schedules.services``). The
runs it starts belong to the token's user."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.authentication import TokenScope
from portal.api.errors import Refused
from portal.api.models import ApiToken
from portal.api.views import errors
from portal.scenarios.models import Scenario
from portal.schedules import services
from portal.schedules.models import Schedule

SCENARIO_ID = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The scenario's id"
)


class ScheduleIn(serializers.Serializer):
    cron = serializers.CharField(
        max_length=120, help_text="Five cron fields (minute hour day month weekday) or 'daily at HH:MM'."
    )
    time_zone = serializers.CharField(
        max_length=63,
        required=False,
        help_text="IANA zone the cron is read in (default: the current, else UTC).",
    )
    enabled = serializers.BooleanField(required=False, default=True)


class ScheduleOut(serializers.Serializer):
    scenario = serializers.UUIDField()
    cron = serializers.CharField(allow_null=True, help_text="null: the scenario is not scheduled.")
    time_zone = serializers.CharField(allow_null=True)
    enabled = serializers.BooleanField()
    next_run_at = serializers.DateTimeField(allow_null=True, help_text="UTC; null when none is due.")


def scenario_of(request: Request, code) -> Scenario:
    """The scenario ``code`` of the token's project; another project's is a 404 like a made-up id."""
    try:
        return Scenario.objects.get(project_id=request.auth.project_id, code=code)
    except Scenario.DoesNotExist:
        raise NotFound("No such scenario.") from None


def _answer(scenario) -> Response:
    return Response(services.describe(Schedule.objects.filter(scenario=scenario).first(), scenario))


class ScheduleScope(TokenScope):
    """``TokenScope``, except that saving a schedule with a ``run`` token leaves the role to the
    check the page and the CLI make (``services.refusal``), so the answer says why."""

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if request.method == "PUT" and isinstance(token, ApiToken) and token.scope == ApiToken.Scope.RUN:
            return True
        return super().has_permission(request, view)


class ScenarioSchedule(APIView):
    permission_classes = [ScheduleScope]

    @extend_schema(
        operation_id="scenarios_schedule_retrieve",
        summary="The scenario's schedule and its next run",
        parameters=[SCENARIO_ID],
        responses={200: ScheduleOut, **errors(403, 404)},
    )
    def get(self, request: Request, id) -> Response:
        return _answer(scenario_of(request, id))

    @extend_schema(
        operation_id="scenarios_schedule_set",
        summary="Schedule the scenario (or change its schedule); its runs belong to the token's user",
        parameters=[SCENARIO_ID],
        request=ScheduleIn,
        responses={200: ScheduleOut, **errors(400, 403, 404)},
    )
    def put(self, request: Request, id) -> Response:
        scenario = scenario_of(request, id)
        why = services.refusal(scenario, request.user)  # before anything is read or saved
        if why:
            raise PermissionDenied(why)
        form = ScheduleIn(data=request.data if isinstance(request.data, dict) else {})
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            services.set_schedule(
                scenario, request.user, data["cron"], data.get("time_zone"), enabled=data["enabled"]
            )
        except services.ScheduleRefused as exc:  # the role changed since the check above
            raise PermissionDenied(str(exc)) from None
        except services.ScheduleError as exc:
            raise Refused({"cron": [str(exc)]}) from None
        return _answer(scenario)

    @extend_schema(
        operation_id="scenarios_schedule_delete",
        summary="Remove the scenario's schedule",
        parameters=[SCENARIO_ID],
        request=None,
        responses={200: ScheduleOut, **errors(403, 404)},
    )
    def delete(self, request: Request, id) -> Response:
        scenario = scenario_of(request, id)
        services.clear_schedule(scenario)
        return _answer(scenario)
