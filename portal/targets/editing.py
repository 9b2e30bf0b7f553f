"""Correcting a target: its name and URLs, edited in place (a typo in a URL fixed on the target, not
a new target made by the run form), and which target a run form's URLs join.

What an edit changes and keeps:

- the runs keep the URLs they measured (their own config and signed reports); the target's trend,
  baseline and SSH access stay;
- the target's saved scenarios take the new URLs, each as a new version (a run records the version
  it ran); their sealed headers and credentials stay bound to the origins they were saved for, so a
  scenario whose origin changed asks for them again (``portal.scenarios.secrets``);
- an origin (scheme, host, port) the target did not have before has never been verified: the
  target's verification is reset, and no run starts before it is verified again (DESIGN.md §11).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.urls import reverse

from portal.lib.report.targetnames import default_name
from portal.lib.runs.protocol import ARM_SCHEMES
from portal.lib.security.verification import origin_or_none
from portal.scenarios.models import Scenario
from portal.scenarios.secrets import origin as secret_origin
from portal.scenarios.secrets import secret_origins
from portal.targets.models import Target


def origins(plain_url: str, tls_url: str) -> set[str]:
    """The origins (``scheme://host:port``) of a target's URLs."""
    return {o for o in (origin_or_none(url) for url in (plain_url, tls_url) if url) if o}


@dataclass
class Edit:
    """What an edit did: ``renamed``, ``moved`` (URLs changed), ``reverify`` (new origins, so the
    verification was reset), the scenarios that took the new URLs and those of them whose saved
    secrets belong to the old origins."""

    name: str = ""
    renamed: bool = False
    moved: bool = False
    reverify: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)
    secrets_left_behind: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.renamed or self.moved


def scenarios_needing(target: Target, plain_url: str, tls_url: str) -> list[tuple[str, list[str]]]:
    """(scenario name, its arms) of the target's scenarios whose arms need a URL that ``plain_url`` or
    ``tls_url`` leaves empty."""
    urls = {"http": plain_url, "https": tls_url}
    out = []
    for scenario in Scenario.objects.filter(target=target).order_by("name"):
        arms = [arm for arm in scenario.config.get("arms") or [] if arm in ARM_SCHEMES]
        missing = [arm for arm in arms if not urls[ARM_SCHEMES[arm]]]
        if missing:
            out.append((scenario.name, missing))
    return out


def edit_target(target: Target, *, name: str, plain_url: str, tls_url: str) -> Edit:
    """Rename ``target`` and set its URLs (both checked by ``TargetEditForm``), with the scenarios and
    the verification as the module says, in one transaction. A target named after its URL (the run
    form's default) and left so keeps being named after it."""
    plain_url, tls_url = plain_url or "", tls_url or ""
    with transaction.atomic():
        target = Target.objects.select_for_update().get(pk=target.pk)
        if name == target.name == default_name(target.plain_url, target.tls_url):
            name = default_name(plain_url, tls_url)  # named after its URL: the name follows the URL
        edit = Edit(
            name=name,
            renamed=name != target.name,
            moved=(plain_url, tls_url) != (target.plain_url, target.tls_url),
        )
        if not edit.changed:
            return edit
        before = origins(target.plain_url, target.tls_url)
        fields = {"name": name, "plain_url": plain_url, "tls_url": tls_url}
        edit.reverify = sorted(origins(plain_url, tls_url) - before)
        if edit.reverify:
            fields.update(verified_at=None, verified_by_method="", verification_error="")
        Target.objects.filter(pk=target.pk).update(**fields)
        if edit.moved:
            for scenario in Scenario.objects.select_for_update().filter(target=target).order_by("name"):
                config = {**scenario.config, "plain_url": plain_url, "tls_url": tls_url}
                if config.get("secrets"):
                    # Written down before the URLs change: a scenario saved before its secrets'
                    # origins were recorded reads them from its URLs, which now point elsewhere.
                    sealed_for = secret_origins(scenario)
                    config["secret_origins"] = sealed_for
                    now = {secret_origin(url) for url in (plain_url, tls_url) if url}
                    if not now <= set(sealed_for):
                        edit.secrets_left_behind.append(scenario.name)
                scenario.config = config
                scenario.version += 1
                scenario.save(update_fields=["config", "version", "updated"])
                edit.scenarios.append(scenario.name)
    return edit


def get_or_create_target(project, name: str, plain_url: str, tls_url: str) -> Target:
    """The project's target for this URL pair (made on first use), so runs group by target."""
    target, _ = Target.objects.get_or_create(
        project=project, plain_url=plain_url or "", tls_url=tls_url or "", defaults={"name": name}
    )
    return target


def joining(project, plain_url: str, tls_url: str) -> Target | None:
    """The target of ``project`` a run with these URLs joins (``portal.runs.services``), or None:
    the run would make a new one."""
    if not (plain_url or tls_url):
        return None
    return Target.objects.filter(project=project, plain_url=plain_url or "", tls_url=tls_url or "").first()


def known_targets(project) -> list[dict]:
    """The project's targets as the run form's note names them (``static/js/run_form.js`` reads the
    same list): name, URLs, the page that edits them."""
    return [
        {
            "name": t.name,
            "plain_url": t.plain_url,
            "tls_url": t.tls_url,
            "edit_url": reverse("targets-edit", args=[t.code]),
        }
        for t in Target.objects.filter(project=project).order_by("name")
    ]


def target_note(known: list[dict], plain_url: str, tls_url: str) -> dict:
    """Whether a run with these URLs joins one of ``known`` (``joins``) or makes a new target
    (``new``), and then the targets with an origin in common (``near``: likely the one meant);
    ``others``: the project has targets, one of which may be the one meant."""
    plain_url, tls_url = plain_url or "", tls_url or ""
    if not (plain_url or tls_url):
        return {"joins": None, "new": False, "near": [], "others": bool(known)}
    joins = next((t for t in known if (t["plain_url"], t["tls_url"]) == (plain_url, tls_url)), None)
    wanted = origins(plain_url, tls_url)
    near = [] if joins else [t for t in known if origins(t["plain_url"], t["tls_url"]) & wanted]
    return {"joins": joins, "new": joins is None, "near": near[:3], "others": bool(known)}
