"""What the API answers (output serializers) and what it accepts (input serializers, which also
document the request bodies in the OpenAPI schema). Runs are validated by the run form through
``portal.runs.starting``; the inline run serializer describes the keys it takes, made from
``portal.lib.runs.runspec.RunSpec`` like the form's fields."""

from __future__ import annotations

from typing import Literal, get_args, get_origin

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.lib.report import evidence
from portal.lib.runs import runspec
from portal.runs.configs import public_config
from portal.runs.models import Run
from portal.runs.reporting import report_url


def api_url(name: str, run: Run, request=None) -> str:
    path = reverse(name, args=[run.code])
    return request.build_absolute_uri(path) if request is not None else path


SUMMARY_KEYS = ("requests", "arms", "answers", "costs", "headline", "validity", "checks", "invalid_arms")


class ErrorOut(serializers.Serializer):
    status = serializers.IntegerField(help_text="The HTTP status code, repeated.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field name (or non_field_errors) → messages; empty when no field is at fault.",
    )
    detail = serializers.CharField()


class ConflictOut(ErrorOut):
    run_status = serializers.ChoiceField(choices=Run.Status.choices, required=False)


class TargetRef(serializers.Serializer):
    id = serializers.UUIDField(source="code")
    name = serializers.CharField()


class TargetOut(TargetRef):
    plain_url = serializers.CharField(allow_blank=True)
    tls_url = serializers.CharField(allow_blank=True)
    mtls_url = serializers.CharField(
        allow_blank=True,
        help_text="Where the tls_mtls arm goes when the server asks for client certificates on another "
        "port or name than tls_url's (the demo's Caddy: the TLS port + 1); empty: tls_url. Set on the "
        "target's client-certificate page.",
    )
    verified = serializers.SerializerMethodField()
    created = serializers.DateTimeField()

    def get_verified(self, target) -> bool:
        return target.verified_at is not None


class ScenarioOut(serializers.Serializer):
    id = serializers.UUIDField(source="code")
    name = serializers.CharField()
    version = serializers.IntegerField()
    target = TargetRef()
    budgets = serializers.DictField(help_text="Budget name → limit (see docs/api.md).")
    tolerance_pct = serializers.FloatField(
        help_text="Regression tolerance against the pinned baseline, % of its cost (docs/watching.md)."
    )
    updated = serializers.DateTimeField()


class ScenarioRef(serializers.Serializer):
    id = serializers.UUIDField()
    version = serializers.IntegerField(allow_null=True)


class RunLinks(serializers.Serializer):
    self = serializers.URLField()
    report = serializers.URLField(help_text="The report JSON (API).")
    report_page = serializers.URLField(help_text="The report page in the portal (needs a login).")
    cancel = serializers.URLField()
    baseline = serializers.URLField(help_text="POST pins the run as its target's baseline, DELETE unpins it.")


class RunOut(serializers.Serializer):
    id = serializers.UUIDField(source="code")
    status = serializers.ChoiceField(choices=Run.Status.choices)
    status_line = serializers.SerializerMethodField(
        help_text="The status as the portal says it: a failed or incomplete run's reason first, then what "
        'its checks found ("failed: no arm measured the page: 404 × 1,200 on every arm · 2 invalid arms '
        '(plain, tls) and 1 failed check"; "incomplete: no cost could be computed — plain arm refused: …"; '
        '"succeeded with 1 warning").'
    )
    error = serializers.SerializerMethodField()
    baseline = serializers.SerializerMethodField(help_text="Whether the run is its target's pinned baseline.")
    created = serializers.DateTimeField()
    started = serializers.DateTimeField(allow_null=True)
    finished = serializers.DateTimeField(allow_null=True)
    source = serializers.CharField(help_text="web, cli, api or webhook")
    target = TargetOut()
    scenario = serializers.SerializerMethodField()
    config = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()
    budgets = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    def get_status_line(self, run) -> str:
        return evidence.status_text(run.status, run.error, evidence.summary_badge(run.status, run.summary))

    def get_error(self, run) -> str | None:
        return run.error or None

    def get_baseline(self, run) -> bool:
        return run.target.baseline_id == run.pk

    @extend_schema_field(ScenarioRef(allow_null=True))
    def get_scenario(self, run):
        if run.scenario_id is None:
            return None
        return {"id": str(run.scenario.code), "version": run.scenario_version}

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_config(self, run) -> dict:
        return public_config(run.config)

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_summary(self, run):
        """Costs and headline once the run has ended (``null`` before)."""
        summary = run.summary or {}
        return {key: summary[key] for key in SUMMARY_KEYS if key in summary} or None

    @extend_schema_field({"type": "object", "nullable": True, "additionalProperties": True})
    def get_budgets(self, run):
        return (run.summary or {}).get("budgets")

    @extend_schema_field(RunLinks)
    def get_links(self, run) -> dict:
        request = self.context.get("request")
        return {
            "self": api_url("api-run", run, request),
            "report": api_url("api-run-report", run, request),
            "report_page": report_url(run, request),
            "cancel": api_url("api-run-cancel", run, request),
            "baseline": api_url("api-run-baseline", run, request),
        }


class ScenarioRunIn(serializers.Serializer):
    scenario = serializers.UUIDField(help_text="The id of a saved scenario of the token's project.")
    overrides = serializers.DictField(
        required=False,
        help_text=f"Keys to change for this run: {', '.join(runspec.OVERRIDABLE)}; and budgets "
        "(budget name → limit), which replace the scenario's for this run ({} for none).",
    )


def _api_field(annotation, bounds: dict, **common) -> serializers.Field:
    """The DRF field documenting one ``RunSpec`` type (the run form validates it: ``starting``)."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    nullable = type(None) in get_args(annotation)
    origin = get_origin(annotation)
    limits = {"min_value": bounds.get("ge"), "max_value": bounds.get("le")}
    if annotation is bool:
        return serializers.BooleanField(**common)
    if annotation is str:
        return serializers.CharField(allow_blank=True, max_length=bounds.get("max_length"), **common)
    if annotation is int or (nullable and args == [int]):
        return serializers.IntegerField(allow_null=nullable, **limits, **common)
    if annotation is float or (nullable and args == [float]):
        return serializers.FloatField(allow_null=nullable, **limits, **common)
    if origin is Literal:
        return serializers.ChoiceField(choices=list(get_args(annotation)), **common)
    if origin is list:
        item, item_bounds = runspec.item_type(args[0])
        return serializers.ListField(child=_api_field(item, item_bounds), **common)
    if origin is dict and args == [str, str]:
        return serializers.DictField(child=serializers.CharField(), **common)
    if annotation is dict or (nullable and args == [dict]):
        return serializers.DictField(allow_null=nullable, **common)
    return serializers.JSONField(**common)  # a number or a word (generators), an object (a path)


def inline_run_fields(spec=runspec.RunSpec) -> dict[str, serializers.Field]:
    """``InlineRunIn``'s fields: every ``RunSpec`` option, typed and bounded as the spec says, plus
    ``budgets``."""
    fields = {
        name: _api_field(opt.annotation, opt.bounds, required=False, help_text=opt.description or None)
        for name, opt in runspec.options(spec).items()
    }
    fields["budgets"] = serializers.DictField(
        child=serializers.FloatField(),
        required=False,
        help_text="Budget name → limit, judged when the run ends (docs/budgets.md), e.g. "
        '{"keepalive_tls_p50_ms": 2, "failed_checks": 0}; the verdicts appear under the run\'s budgets.',
    )
    return fields


# The keys of a report's ``run.config``, plus the URLs (limits and the address policy apply as in
# the run form).
InlineRunIn = type("InlineRunIn", (serializers.Serializer,), inline_run_fields())


class ShareIn(serializers.Serializer):
    days = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="Default 30; the operator sets a maximum."
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")


class ShareOut(serializers.Serializer):
    id = serializers.CharField()
    url = serializers.URLField()
    expires_at = serializers.DateTimeField()
