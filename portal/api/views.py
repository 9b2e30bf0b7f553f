"""The JSON API's endpoints. Every object is looked up within the token's project, so another
project's run is a 404 like a run that does not exist; the scope and the user's role are checked by
``authentication.TokenScope`` before a view runs."""

from __future__ import annotations

from uuid import UUID

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.generics import ListAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api import serializers as s
from portal.api.errors import Conflict, Refused
from portal.runs import quotas, reporting, services
from portal.runs.models import Run
from portal.runs.starting import RunRefused, start_run
from portal.scenarios.models import Scenario
from portal.sharing import services as sharing
from portal.targets.models import Target


class Page(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


def errors(*codes: int, conflict: str = "The run has already ended") -> dict:
    """Schema of the error answers ``codes`` (every endpoint: 401; plus what it adds); ``conflict``
    says when the endpoint answers 409."""
    described = {
        400: "Invalid input: field messages under errors",
        401: "No, unknown or revoked token (WWW-Authenticate: Bearer)",
        403: "The token's scope or the user's role does not allow this",
        404: "No such object in the token's project",
        409: conflict,
    }
    out = {code: OpenApiResponse(s.ErrorOut, description=described[code]) for code in (401, *codes)}
    if 409 in codes:
        out[409] = OpenApiResponse(s.ConflictOut, description=described[409])
    return out


# Named as the run's JSON names it ("id"), and as docs/api.md writes the paths (tests/api/test_docs.py).
RUN_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The run's id")


def project_runs(request: Request) -> QuerySet[Run]:
    return Run.objects.filter(project_id=request.auth.project_id).select_related("target", "scenario")


def get_run(request: Request, code) -> Run:
    try:
        return project_runs(request).get(code=code)
    except Run.DoesNotExist:
        raise NotFound("No such run.") from None


def run_response(run: Run, request: Request, code: int = status.HTTP_200_OK, **headers) -> Response:
    return Response(s.RunOut(run, context={"request": request}).data, status=code, headers=headers)


def scenario_of(request: Request, code) -> Scenario:
    """The saved scenario ``code`` (any JSON value) of the token's project; another project's is as
    unknown as a made-up id."""
    try:
        return Scenario.objects.get(project_id=request.auth.project_id, code=UUID(str(code)))
    except (Scenario.DoesNotExist, ValueError):
        raise Refused({"scenario": ["No such scenario in this project."]}) from None


class Runs(ListAPIView):
    serializer_class = s.RunOut
    pagination_class = Page

    def get_queryset(self) -> QuerySet[Run]:
        runs = project_runs(self.request).order_by("-created")
        wanted = self.request.query_params.get("status")
        if wanted:
            if wanted not in Run.Status.values:
                raise Refused({"status": [f"One of {', '.join(Run.Status.values)}."]})
            runs = runs.filter(status=wanted)
        return runs

    @extend_schema(
        operation_id="runs_list",
        summary="The token's project's runs, newest first",
        parameters=[OpenApiParameter("status", str, enum=Run.Status.values, description="Only these")],
        responses={200: s.RunOut(many=True), **errors(400, 403, 404)},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="runs_create",
        summary="Start a run: from a saved scenario with overrides, or inline",
        request=PolymorphicProxySerializer(
            component_name="RunIn",
            serializers=[s.ScenarioRunIn, s.InlineRunIn],
            resource_type_field_name=None,
        ),
        responses={201: s.RunOut, **errors(400, 403)},
    )
    def post(self, request: Request) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise Refused({"non_field_errors": ["Expected a JSON object."]})
        scenario = None
        if "scenario" in data:
            extra = sorted(set(data) - {"scenario", "overrides"})
            if extra:
                raise Refused({key: ["Next to scenario only overrides may be given."] for key in extra})
            scenario = scenario_of(request, data["scenario"])
            data = data.get("overrides")
            data = {} if data is None else data
            if not isinstance(data, dict):
                raise Refused({"overrides": ["Expected an object of run keys."]})
        try:
            run = start_run(request.user, request.auth.project, data, scenario=scenario, source="api")
        except RunRefused as refused:
            quotas.audit_refusals(request, request.auth.project, refused.quota_refusals)
            raise Refused(refused.errors) from None
        except ValueError as exc:  # the engine refused the config (a bug the form should have caught)
            raise Refused({"non_field_errors": [str(exc)]}) from None
        run = project_runs(request).get(pk=run.pk)
        location = s.api_url("api-run", run, request)
        return run_response(run, request, status.HTTP_201_CREATED, Location=location)


class RunDetail(APIView):
    @extend_schema(
        operation_id="runs_retrieve", parameters=[RUN_ID], responses={200: s.RunOut, **errors(403, 404)}
    )
    def get(self, request: Request, id) -> Response:
        return run_response(get_run(request, id), request)


class RunReport(APIView):
    @extend_schema(
        operation_id="runs_report",
        summary="The run's report JSON (as downloaded from the portal)",
        parameters=[RUN_ID],
        responses={200: OpenApiTypes.OBJECT, **errors(403, 404)},
    )
    def get(self, request: Request, id) -> Response:
        return Response(reporting.export_report(get_run(request, id), request))


class RunCancel(APIView):
    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel: a queued run at once (200), a running one at its next step (202)",
        parameters=[RUN_ID],
        request=None,
        responses={200: s.RunOut, 202: s.RunOut, **errors(403, 404, 409)},
    )
    def post(self, request: Request, id) -> Response:
        run = get_run(request, id)
        # As the web cancel (portal.runs.views.runs_cancel): conditional updates, so a run that ends
        # meanwhile is reported as ended, never cancelled after the fact.
        outcome = services.cancel(run)
        if outcome == services.CANCELLED:
            answer = status.HTTP_200_OK
        elif outcome == services.STOPPING:
            answer = status.HTTP_202_ACCEPTED
        else:
            run.refresh_from_db()
            raise Conflict(f"The run has already {run.status}.", run_status=run.status)
        run.refresh_from_db()
        return run_response(run, request, answer)


class RunBaseline(APIView):
    @extend_schema(
        operation_id="runs_pin_baseline",
        summary="Pin the run as its target's baseline (compares start from it)",
        parameters=[RUN_ID],
        request=None,
        responses={
            200: s.RunOut,
            **errors(403, 404, 409, conflict="The run cannot be a baseline: detail says why"),
        },
    )
    def post(self, request: Request, id) -> Response:
        run = get_run(request, id)
        try:
            services.pin_baseline(run)  # the same check as the run page's button
        except services.NotABaseline as exc:
            raise Conflict(str(exc), run_status=run.status) from None
        return run_response(run, request)

    @extend_schema(
        operation_id="runs_unpin_baseline",
        summary="Unpin the run if it is its target's baseline",
        parameters=[RUN_ID],
        request=None,
        responses={200: s.RunOut, **errors(403, 404)},
    )
    def delete(self, request: Request, id) -> Response:
        run = get_run(request, id)
        services.unpin_baseline(run)
        return run_response(run, request)


class RunShares(APIView):
    @extend_schema(
        operation_id="runs_share",
        summary="A read-only share link to the run (for someone without an account)",
        parameters=[RUN_ID],
        request=s.ShareIn,
        responses={201: s.ShareOut, **errors(400, 403, 404)},
    )
    def post(self, request: Request, id) -> Response:
        run = get_run(request, id)
        form = s.ShareIn(data=request.data if isinstance(request.data, dict) else {"days": "not an object"})
        form.is_valid(raise_exception=True)
        try:
            link, token = sharing.create_share(
                request.user,
                run=run,
                days=form.validated_data.get("days"),
                note=form.validated_data["note"],
                request=request,
            )
        except ValueError as exc:  # beyond the operator's maximum, or a note the service refuses
            raise Refused({"note" if "note" in str(exc) else "days": [str(exc)]}) from None
        out = {
            "id": str(link.code),
            "url": sharing.share_url(token, request),
            "expires_at": link.expires_at,
        }
        return Response(s.ShareOut(out).data, status=status.HTTP_201_CREATED)


class Targets(ListAPIView):
    serializer_class = s.TargetOut
    pagination_class = Page

    def get_queryset(self) -> QuerySet[Target]:
        return Target.objects.filter(project_id=self.request.auth.project_id).order_by("name", "pk")

    @extend_schema(operation_id="targets_list", responses={200: s.TargetOut(many=True), **errors(403, 404)})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)
