"""The alert deliveries of a scenario's runs on its page: ``{% alert_deliveries scenario %}``. A tag,
so the scenario app renders it without importing this one."""

from __future__ import annotations

from django import template

from portal.alerts.models import AlertChannel, AlertDelivery

register = template.Library()
ROWS = 20


@register.inclusion_tag("alerts/_deliveries.html")
def alert_deliveries(scenario) -> dict:
    return {
        "scenario": scenario,
        "channels": AlertChannel.objects.filter(project_id=scenario.project_id, enabled=True).count(),
        "deliveries": list(
            AlertDelivery.objects.filter(alert__judgement__scenario=scenario).select_related(
                "alert__judgement__run"
            )[:ROWS]
        ),
    }
