"""The template context of a run's report and of a compare view, shared by the portal's own pages
(portal.runs.views) and the read-only shared pages (portal.sharing): one computation, one markup
(templates/runs/_report.html, _compare_body.html)."""

from __future__ import annotations

from portal.lib import validity
from portal.lib.report import answers, compare, evidence
from portal.lib.stats import costs
from portal.runs import reporting
from portal.runs.models import Run

# A cost's name in words, as the answer table asks it (declared once: portal.lib.report.answers.QUESTIONS).
COST_LABELS = answers.WORDS


def report_context(run: Run, request=None) -> dict:
    """What templates/runs/_report.html needs: empty of ``report`` while the run has no arm yet."""
    ctx: dict = {"cost_labels": COST_LABELS}
    page = reporting.report_page(run, request)
    data = page["report"]
    ctx["budgets"] = data.get("budgets")  # templates/runs/_budgets.html
    if data["arms"]:
        ctx["report"] = data
        ctx["arm_rows"] = [
            (name, section, data["deltas"].get(name)) for name, section in data["arms"].items()
        ]
        ctx["cut_short"] = [name for name, section in data["arms"].items() if not section["complete"]]
        ctx["lost_generators"] = [g["id"] for g in data.get("generators") or [] if g["lost_at"] is not None]
        ctx["chart"] = page["charts"]
        cpu = {c["name"]: c for c in data["costs"] if c["metric"] == "server_cpu_ms_per_req"}
        ctx["headline"] = [
            {
                **cost,
                "label": COST_LABELS.get(cost["name"], cost["name"]),
                "server_cpu": cpu.get(cost["name"]),
            }
            for cost in costs.headline_costs(data["costs"])
        ]
        ctx["refused_arms"] = data["run"].get("refused_arms") or []
        ctx["evidence"] = evidence_context(run, data)
        ctx["expected_label"] = validity.expected_label(run.config.get("expected_status") or [])
    return ctx


def evidence_context(run: Run, data: dict) -> dict:
    """The status line's badge (checks that warned or failed) and the arms that are invalid; which
    costs that leaves unjudged or warned is in the headline sentence."""
    invalid = data["run"].get("invalid_arms") or {}
    return {
        "badge": evidence.status_badge(run.status, data["run"].get("checks"), list(invalid)),
        "invalid": invalid,
    }


def compare_context(runs: list[Run], request=None) -> dict:
    """What templates/runs/_compare_body.html needs for ``runs`` (run 1 the reference), badges set
    on the runs; ``data`` is also the compare JSON."""
    pages = [reporting.report_page(run, request) for run in runs]
    reports = [page["report"] for page in pages]
    data = compare.compare(reports)
    for run, found in zip(runs, reports, strict=True):
        run.badge = evidence.status_badge(
            run.status, found["run"].get("checks"), list(found["run"].get("invalid_arms") or {})
        )
    chart = {
        "runs": [f"{i + 1}: {run.created:%Y-%m-%d %H:%M}" for i, run in enumerate(runs)],
        "costs": data["costs"],
        "curves": [page["charts"].get("curve", {}) for page in pages],
    }
    return {"runs": runs, "data": data, "chart": chart, "cost_labels": COST_LABELS}
