"""Starting a run from data that is no web form: the API's JSON and a saved scenario with overrides
(the API, webhooks, the scenario page).

Everything goes through ``RunForm``, so limits, quotas, target verification and the outbound address
policy apply exactly as in the form; a refusal is ``RunRefused`` with field messages under the JSON
names. The JSON keys are those of a report's ``run.config`` (``arms`` as a list of names), plus
``plain_url``, ``tls_url`` and ``target_name``; and ``budgets`` (``{name: limit}``,
``portal.lib.report.budgets``): a run's budgets, judged in its report (on a scenario's run they replace the
scenario's), a scenario's budgets when saving one (with ``callback_url``).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F

from portal.lib.report import budgets as budgetlib
from portal.lib.runs import runspec
from portal.lib.watching import judgements as judge
from portal.runs import dispatch, services
from portal.runs.forms import CUSTOM_FIELDS, RunForm
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.scenarios.secrets import SCENARIO_ONLY_KEYS, SavedSecrets, scenario_config
from portal.validators import check_callback_url

# The JSON keys (portal.lib.runs.runspec.RunSpec); a spec option without a custom form field goes to its
# form field as the JSON gives it (the form's fields take typed values), the others are unpacked here.
KEYS = runspec.KEYS
OVERRIDABLE = runspec.OVERRIDABLE
# Form field -> JSON key, for error messages.
JSON_NAMES = {
    **{opt.form_name: key for key, opt in runspec.OPTIONS.items() if opt.form_name != key},
    **{field: key for key, fields in CUSTOM_FIELDS.items() for field in fields},
    "__all__": "non_field_errors",
}
UNPACKED = (
    "headers",
    "auth",
    "saturation",
    "probes",
    "client_cert",
)  # by _structured, into several form fields
PROBE_FIELDS = {"ssh": "probe_server", "openssl_speed": "openssl_speed", "cryptsetup": "cryptsetup"}


class RunRefused(Exception):
    """The run was not started: ``errors`` maps JSON keys (or ``non_field_errors``) to messages;
    ``quota_refusals`` are the quota messages among them, for the audit log (as the run page does)."""

    def __init__(self, errors: dict[str, list[str]], quota_refusals: list[str] | None = None) -> None:
        super().__init__("; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in errors.items()))
        self.errors = errors
        self.quota_refusals = quota_refusals or []


def default_form_data() -> dict:
    """The form's defaults for keys a JSON body leaves out (booleans included: a missing checkbox
    would otherwise read as unticked)."""
    values = {opt.form_name: opt.default for opt in runspec.OPTIONS.values() if opt.kind != "custom"}
    return {**values, "auth_type": "none"}


def _lines(value, what: str, render) -> str:
    if isinstance(value, str):
        return value
    if not isinstance(value, list | dict):
        raise RunRefused({what: ["Expected a list or a string."]})
    try:
        return "\n".join(render(value))
    except (TypeError, KeyError, AttributeError):
        raise RunRefused({what: ["Malformed entries."]}) from None


def _structured(data: dict) -> dict:
    """Form values for the custom JSON keys present in ``data`` (headers, auth, saturation, probes)."""
    out: dict = {}
    if "headers" in data:
        out["headers"] = _lines(
            data["headers"], "headers", lambda items: (f"{k}: {v}" for k, v in items.items())
        )
    if "auth" in data:
        auth = data["auth"] or {}
        if not isinstance(auth, dict):
            raise RunRefused({"auth": ['An object {"type": "basic"|"bearer", "user", "secret"}.']})
        out.update(
            auth_type=auth.get("type") or "none",
            auth_user=auth.get("user") or "",
            auth_secret=auth.get("secret") or "",
        )
    if "saturation" in data:
        out.update(_saturation_fields(data["saturation"]))
    if "client_cert" in data:
        pair = data["client_cert"] or {}
        if not isinstance(pair, dict) or not all(isinstance(pair.get(k, ""), str) for k in ("cert", "key")):
            raise RunRefused(
                {"client_cert": ['An object {"cert": PEM certificate, "key": PEM key} or null.']}
            )
        out.update(client_cert_pem=pair.get("cert") or "", client_key_pem=pair.get("key") or "")
    if "probes" in data:
        probes = data["probes"] or {}
        if not isinstance(probes, dict):
            raise RunRefused(
                {"probes": ['An object {"ssh", "openssl_speed", "cryptsetup", "local_process"}.']}
            )
        out.update({field: bool(probes.get(key)) for key, field in PROBE_FIELDS.items()})
        out["local_process"] = probes.get("local_process") or ""
    return out


def _saturation_fields(value) -> dict:
    """The run form's ``saturation_*`` fields for the JSON ``saturation``: an object
    ``{"arms", "mode", "start", "max", "stage_s"}`` (``portal.lib.stats.saturation``), a list or
    comma-separated string of arms, or null/{} for no search."""
    if isinstance(value, str | list):
        value = {"arms": value}
    value = value or {}
    if not isinstance(value, dict):
        raise RunRefused({"saturation": ['An object {"arms", "mode", "start", "max", "stage_s"} or null.']})
    unknown = sorted(set(value) - {"arms", "mode", "start", "max", "stage_s"})
    if unknown:
        raise RunRefused({"saturation": [f"Unknown key(s) {', '.join(unknown)}."]})
    arms = value.get("arms") or []
    if isinstance(arms, str):
        arms = [item.strip() for item in arms.split(",") if item.strip()]
    fields = {"saturation_arms": arms, "saturation_mode": value.get("mode") or "users"}
    for key in ("start", "max", "stage_s"):
        fields[f"saturation_{key}"] = "" if value.get(key) is None else value[key]
    return fields


def _names(key: str, value) -> list:
    """A list of names (``arms``, ``tls_matrix``): a JSON list, or a comma-separated string as the CLI
    takes it; an arm may be given as its ``run.config`` object (``{"name", "url"}``)."""
    if isinstance(value, str) and key != "arms":
        return [item.strip() for item in value.split(",") if item.strip()]
    if value is None and key != "arms":
        return []
    if not isinstance(value, list) or not all(isinstance(item, str | dict) for item in value):
        example = '["plain", "tls", "tls_new"]' if key == "arms" else '["protocol", "cert"]'
        raise RunRefused({key: [f"A list of {runspec.OPTIONS[key].extra['item']} names, e.g. {example}."]})
    return [item.get("name") if isinstance(item, dict) else item for item in value]


def form_data(data: dict, base: dict | None = None) -> dict:
    """The run form's data for a JSON body, over ``base`` (the defaults, or a saved scenario's values)."""
    if not isinstance(data, dict):
        raise RunRefused({"non_field_errors": ["Expected a JSON object."]})
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        known = ", ".join((*KEYS, "budgets"))  # budgets_of took them out before this check
        raise RunRefused({key: [f"Unknown field; known: {known}."] for key in unknown})
    out = dict(base if base is not None else default_form_data())
    for key, value in data.items():
        opt = runspec.OPTIONS[key]
        if key in UNPACKED:
            continue
        if isinstance(value, list | dict) and opt.kind not in ("choices", "text", "lines"):
            raise RunRefused({key: ["Expected a single value."]})
        if opt.kind == "choices":
            value = _names(key, value)
        out[opt.form_name] = "" if value is None else value
    out.update(_structured(data))
    return out


def scenario_form_data(scenario: Scenario) -> dict:
    """A saved scenario's form values (its sealed secrets are not among them: ``SavedSecrets``)."""
    values = {k: v for k, v in scenario.config.items() if k not in SCENARIO_ONLY_KEYS}
    return {k: ("" if v is None else v) for k, v in values.items()}


def _errors(form: RunForm) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for field, messages in form.errors.items():
        errors.setdefault(JSON_NAMES.get(field, field), []).extend(messages)
    return errors


def check(project, data: dict, *, scenario: Scenario | None = None) -> RunForm:
    """The validated form for ``data`` (JSON keys; on a scenario only ``OVERRIDABLE`` ones), or
    ``RunRefused``."""
    if scenario is not None:
        extra = sorted(set(data) - set(OVERRIDABLE)) if isinstance(data, dict) else []
        if extra:
            raise RunRefused(
                {
                    key: [f"Not overridable on a saved scenario; allowed: {', '.join(OVERRIDABLE)}, budgets."]
                    for key in extra
                }
            )
        values = form_data(data, scenario_form_data(scenario))
    else:
        values = form_data(data)
    form = RunForm(values, saved=SavedSecrets.of(scenario), project=project)
    if not form.is_valid():
        raise RunRefused(_errors(form), form.quota_refusals)
    return form


def budgets_of(data) -> tuple[dict, dict | None]:
    """``data`` without its ``budgets`` key, and those budgets checked (None when absent: a scenario's
    run then keeps the scenario's). Raises ``RunRefused``."""
    if not isinstance(data, dict) or "budgets" not in data:
        return data, None
    rest = {key: value for key, value in data.items() if key != "budgets"}
    try:
        return rest, budgetlib.clean(data["budgets"])
    except budgetlib.BudgetError as exc:
        raise RunRefused({"budgets": exc.errors}) from None


def start_run(owner, project, data: dict, *, scenario: Scenario | None = None, source: str = "api") -> Run:
    """Validate ``data`` like the run form, then create the run (target made on first use) and queue it.
    Raises ``RunRefused``. The caller has checked that ``owner`` may start runs in ``project``."""
    data, budgets = budgets_of(data)
    form = check(project, data, scenario=scenario)
    cleaned = form.cleaned_data
    with transaction.atomic():
        target = (
            scenario.target
            if scenario is not None
            else services.get_or_create_target(
                project, form.target_name_or_default(), cleaned.get("plain_url"), cleaned.get("tls_url")
            )
        )
        run = services.create_run(
            owner,
            target,
            form.engine_config(),
            scenario=scenario,
            source=source,
            secrets=form.secrets(),
            budgets=budgets,
            client_cert=form.client_cert(),
        )
        dispatch.enqueue(run)
    return run


def tolerance_of(data: dict) -> tuple[dict, float | None]:
    """``data`` without ``tolerance_pct``, and that tolerance checked (None: absent, keep the
    scenario's): a number of percent from 0 to 1,000, in the scenario page's words
    (``portal.lib.watching.judgements.TOLERANCE_ERROR``)."""
    if "tolerance_pct" not in data:
        return data, None
    rest = {key: value for key, value in data.items() if key != "tolerance_pct"}
    value = data["tolerance_pct"]
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= judge.MAX_TOLERANCE_PCT
    ):
        raise RunRefused({"tolerance_pct": [judge.TOLERANCE_ERROR]})
    return rest, float(value)


def callback_of(data: dict) -> tuple[dict, str | None]:
    """``data`` without ``callback_url``, and that URL checked by the outbound policy (None: absent)."""
    if "callback_url" not in data:
        return data, None
    rest = {key: value for key, value in data.items() if key != "callback_url"}
    url = data["callback_url"] or ""
    if not isinstance(url, str):
        raise RunRefused({"callback_url": ["Expected a URL string."]})
    try:
        return rest, check_callback_url(url) if url else ""
    except ValidationError as exc:
        raise RunRefused({"callback_url": exc.messages}) from None


def save_scenario(
    project, name: str, data: dict, *, scenario: Scenario | None = None, replace: bool = False
) -> Scenario:
    """Create (or, given ``scenario``, edit: its version goes up) a saved scenario from JSON keys,
    validated like a run; on an edit, absent keys keep the scenario's values and blank secrets its
    sealed ones — unless ``replace`` (the CLI: the options are the whole scenario). ``budgets`` and
    ``callback_url`` are the scenario's. Raises ``RunRefused``."""
    if not isinstance(data, dict):
        raise RunRefused({"non_field_errors": ["Expected a JSON object."]})
    data, budgets = budgets_of(data)
    data, callback = callback_of(data)
    data, tolerance = tolerance_of(data)
    kept = None if replace else scenario
    base = scenario_form_data(kept) if kept is not None and kept.config else None
    form = RunForm(form_data(data, base), saved=SavedSecrets.of(kept), project=project, queueing=False)
    if not form.is_valid():
        raise RunRefused(_errors(form))
    return store_scenario(
        project,
        form,
        name=name,
        scenario=scenario,
        budgets=budgets,
        callback_url=callback,
        tolerance_pct=tolerance,
    )


def store_scenario(
    project,
    form: RunForm,
    *,
    name: str,
    scenario: Scenario | None = None,
    budgets: dict | None = None,
    callback_url: str | None = None,
    tolerance_pct: float | None = None,
) -> Scenario:
    """Save a valid run form as a scenario (an edit bumps the version); ``budgets``,
    ``callback_url`` and ``tolerance_pct`` None keep the scenario's (a new one: none, none, 10%)."""
    cleaned = form.cleaned_data
    config = scenario_config(cleaned, form.data, form.engine_config(), form.secrets())
    with transaction.atomic():
        target = services.get_or_create_target(
            project, form.target_name_or_default(), cleaned.get("plain_url"), cleaned.get("tls_url")
        )
        if scenario is None:
            scenario = Scenario(project=project, version=1)
        else:
            scenario = Scenario.objects.select_for_update().get(pk=scenario.pk)
            scenario.version += 1
        scenario.name, scenario.target, scenario.config = name, target, config
        if budgets is not None:
            scenario.budgets = budgets
        if callback_url is not None:
            scenario.callback_url = callback_url
        if tolerance_pct is not None:
            scenario.tolerance_pct = tolerance_pct
        scenario.save()
        return scenario


def start_from_form(owner, project, form: RunForm, base: Scenario | None) -> Run:
    """The run page's run: target, scenario (when saved; saved over an existing one, its next
    version) and run in one transaction; queued once it commits."""
    data = form.cleaned_data
    secrets, config = form.secrets(), form.engine_config()
    with transaction.atomic():
        target = services.get_or_create_target(
            project, form.target_name_or_default(), data.get("plain_url"), data.get("tls_url")
        )
        scenario = base
        if data.get("save_as"):
            scenario, made = Scenario.objects.update_or_create(
                project=project,
                name=data["save_as"],
                defaults={"target": target, "config": scenario_config(data, form.data, config, secrets)},
            )
            if not made:  # saved over: a new version of the scenario
                Scenario.objects.filter(pk=scenario.pk).update(version=F("version") + 1)
                scenario.refresh_from_db(fields=["version"])
        run = services.create_run(
            owner, target, config, scenario=scenario, secrets=secrets, client_cert=form.client_cert()
        )
        dispatch.enqueue(run)
    return run
