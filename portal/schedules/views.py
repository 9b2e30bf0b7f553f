"""A scenario's schedule page (members and owners of its project): set, change or remove the
schedule; its firings. The scenario page shows the schedule and the next run
(``templatetags/schedules.py``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.scenarios.access import get_scenario_for_user
from portal.schedules import services
from portal.schedules.forms import ScheduleForm
from portal.schedules.models import Schedule

FIRINGS_SHOWN = 50


def _audit(request: HttpRequest, scenario, schedule: Schedule | None) -> None:
    audit.record(
        request,
        AuditEvent.Kind.SCENARIO_CHANGED,
        scenario=str(scenario.code),
        name=scenario.name,
        schedule=None
        if schedule is None
        else {"cron": schedule.cron, "time_zone": schedule.time_zone, "enabled": schedule.enabled},
        project_id=scenario.project_id,
    )


@login_required
@require_http_methods(["GET", "POST"])
def schedules_edit(request: HttpRequest, code) -> HttpResponse:
    scenario, _role = get_scenario_for_user(request, code)
    # Who may not save a schedule (a viewer) gets the reason the CLI and the API give: one check.
    why = services.refusal(scenario, request.user)
    if why:
        raise PermissionDenied(why)
    schedule = Schedule.objects.filter(scenario=scenario).first()
    if request.method == "POST" and request.POST.get("action") == "remove":
        services.clear_schedule(scenario)
        _audit(request, scenario, None)
        messages.info(request, f"Scenario {scenario.name} is no longer scheduled.")
        return redirect("scenarios-detail", code=scenario.code)
    if request.method == "POST":
        form = ScheduleForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                saved = services.set_schedule(
                    scenario, request.user, data["when"], data["time_zone"], enabled=data["enabled"]
                )
            except services.ScheduleRefused as exc:  # the role changed since the check above
                raise PermissionDenied(str(exc)) from None
            _audit(request, scenario, saved)
            upcoming = services.next_run_at(saved)
            messages.info(
                request,
                f"Scheduled: {saved.cron} ({saved.time_zone})"
                + (f", next run at {upcoming:%Y-%m-%d %H:%M} UTC." if upcoming else ", disabled."),
            )
            return redirect("scenarios-detail", code=scenario.code)
        status = 400
    else:
        initial = (
            {"when": schedule.cron, "time_zone": schedule.time_zone, "enabled": schedule.enabled}
            if schedule
            else {}
        )
        form, status = ScheduleForm(initial=initial), 200
    ctx = {
        "scenario": scenario,
        "schedule": schedule,
        "form": form,
        "next_run_at": services.next_run_at(schedule),
        "firings": schedule.firings.select_related("run")[:FIRINGS_SHOWN] if schedule else [],
    }
    return render(request, "schedules/edit.html", ctx, status=status)
