"""The words and JSON of a regression (or improvement) alert, by pure functions.

One message per judgement (``portal.lib.watching.judgements``), sent the same to every channel: it names each
cost that moved with its change and both 95% intervals, lists what changed in the setup (before →
after), and links to the compare page of the baseline and the run (and, when the project allows it,
a read-only share link of that compare). Three shapes:

- ``text``: the e-mail body and the webhook's text (plain, one fact a line);
- ``incoming_webhook``: ``{"text": …}``, the JSON both Slack's and Microsoft Teams' incoming webhooks
  accept (Slack reads ``<url|label>`` links; plain URLs are links in both);
- ``callback``: the signed callback's JSON (``{"event": "regression", …}``, docs/watching.md).
"""

from __future__ import annotations

from portal.lib.watching import judgements


def moved(result: dict) -> list[dict]:
    """The costs that regressed or improved, regressions first."""
    order = {"regression": 0, "improvement": 1}
    found = [c for c in result.get("costs", []) if c["judgement"] in order]
    return sorted(found, key=lambda c: order[c["judgement"]])


def subject(status: str, scenario: str, target: str) -> str:
    return f"[Tollgate] {status} in {scenario} ({target})"


def text(result: dict, scenario: str, target: str, links: dict) -> str:
    """The alert in plain lines. ``links``: ``run``, ``baseline``, ``compare`` and optionally ``share``."""
    lines = [
        f"Tollgate: {result['status']} in scenario {scenario} (target {target}), against its pinned baseline."
    ]
    lines += [f"- {judgements.describe_cost(c)}" for c in moved(result)]
    lines.append(
        f"Tolerance: {result['tolerance_pct']:g}% of the baseline's cost; 95% intervals must not overlap."
    )
    changes = result.get("changes") or []
    if changes:
        lines.append("What changed since the baseline:")
        lines += [f"- {judgements.describe_change(c)}" for c in changes]
    else:
        lines.append("Nothing recorded in the setup differs from the baseline's.")
    lines.append(f"Compare: {links['compare']}")
    lines.append(f"Run: {links['run']}")
    if links.get("share"):
        lines.append(f"Share link (read-only, no login): {links['share']}")
    return "\n".join(lines)


def incoming_webhook(message: str) -> dict:
    return {"text": message}


def callback(result: dict, scenario: dict, run_id: str, links: dict, message: str) -> dict:
    """The signed callback's body: ``{"event", "scenario", "run_id", "baseline_id", "costs",
    "changes", "tolerance_pct", "links", "text"}``."""
    return {
        "event": result["status"],
        "scenario": scenario,
        "run_id": run_id,
        "baseline_id": result["baseline"],
        "costs": moved(result),
        "changes": result.get("changes") or [],
        "tolerance_pct": result["tolerance_pct"],
        "links": links,
        "text": message,
    }
