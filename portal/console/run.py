"""``tollgate run`` and ``tollgate check-target``: a benchmark from the command line, through the same
forms as the web page, executed in this process (``workers.runner``: the console's one door to the
worker side, like the Celery worker's); and the outbound policy's decision for a URL."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal import outbound
from portal.console import interrupt, projects, run_options
from portal.lib.report import budgets as budgetlib
from portal.lib.report import evidence
from portal.lib.stats import capacity, wan
from portal.lib.stats.costs import UNCONFIRMED
from portal.lib.tls import advice
from portal.runs import reporting, services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets.forms import MtlsUrlForm, SshAccessForm
from portal.targets.sshaccess import save_ssh_access
from portal.validators import validate_text

# `tollgate run` executes the run in this process (Ctrl-C cancels it), so it imports the worker side;
# the web process never does.
from workers import runner

ACTIONS: tuple[str, ...] = ("run", "check-target")
EXIT_RUN_FAILED = 1
# A budget (--budget, docs/budgets.md) failed: the run itself succeeded.
EXIT_BUDGET_FAILED = 3
# The run measured, but none of the costs it asked for could be computed (its arms refused or
# invalid): status incomplete, no answer — a CI job must not go green on it (docs/ci.md).
EXIT_INCOMPLETE = 4


def add_arguments(sub) -> None:
    run = sub.add_parser("run", help="benchmark through the engine, store the run, print the report")
    run_options.add_run_arguments(run)
    run_options.add_tuning_arguments(run.add_argument_group("TLS configuration matrix, WAN projection"))
    run_options.add_saturation_arguments(run.add_argument_group("Capacity: saturation search"))
    run_options.add_probe_arguments(run.add_argument_group("server probes over SSH"))
    check = sub.add_parser(
        "check-target", help="would the outbound address policy let a run reach URL? (sends it nothing)"
    )
    check.add_argument("url")
    check.add_argument("--json", action="store_true", help="print the decision as JSON")


def handle(command: BaseCommand, options: dict) -> None:
    if options["action"] == "run":
        handle_run(command, options)
    else:
        handle_check_target(command, options)


def owner_named(username: str):
    users = get_user_model().objects
    if username:
        try:
            validate_text(username)
            return users.get(username=username)
        except (users.model.DoesNotExist, ValidationError):
            raise CommandError(f"no user named {username!r}") from None
    owner = users.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if owner is None:
        raise CommandError("no superuser exists: create one (manage.py createsuperuser) or pass --owner")
    return owner


def _ssh_form(options: dict) -> SshAccessForm | None:
    """--ssh-* flags, read and checked by the target's SSH form before anything is stored."""
    if not options.get("ssh_host"):
        if options.get("server_process"):
            raise CommandError("--server-process needs --ssh-host (use --local-process for this host)")
        return None
    if not options.get("ssh_key") or not options.get("ssh_user"):
        raise CommandError("--ssh-host needs --ssh-user and --ssh-key")
    # The outbound policy first (for a well-formed host; the form words the rest): a refused
    # host is named before any file is read.
    host = options["ssh_host"]
    decision = outbound.check_host(host, options["ssh_port"])
    if not decision.allowed and not host.startswith("-") and host.isascii():
        raise CommandError(f"--ssh-host: {decision.reason}")
    files = {}
    for name in ("ssh_key", "ssh_known_hosts"):
        try:
            files[name] = Path(options[name]).read_text() if options.get(name) else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"--{name.replace('_', '-')}: {exc}") from None
    form = SshAccessForm(
        data={
            "host": options["ssh_host"],
            "port": options["ssh_port"],
            "username": options["ssh_user"],
            "key_source": "paste",
            "private_key": files["ssh_key"],
            "known_hosts": files["ssh_known_hosts"],
            # Checked here; stored only when given (else the stored one, or nginx, is kept).
            "server_process": options.get("server_process") or "nginx",
        }
    )
    if not form.is_valid():
        raise CommandError(f"invalid options: {run_options.problems(form, run_options.SSH_OPTIONS)}")
    return form


def _store_ssh(target, form: SshAccessForm, server_process: str) -> None:
    """The target's SSH access from the checked form: key encrypted, host key pinned if given."""
    try:
        save_ssh_access(target, form.cleaned_data, keep_process=not server_process)
    except ValidationError as exc:
        raise CommandError(f"invalid options: {'; '.join(exc.messages)}") from None


def _run_form(options: dict, project) -> RunForm:
    """The same form as the web page validates the CLI's values (and the project's quota)."""
    values = run_options.spec_values(options)  # the options of portal.lib.runs.runspec
    form = RunForm(
        data={
            **values,
            "target_name": options["name"],
            "plain_url": options["plain_url"],
            "tls_url": options["tls_url"],
            "paths": "\n".join(options["path"]),
            "headers": "\n".join(options["header"]),
            "probe_server": bool(options.get("ssh_host")),
            "openssl_speed": options.get("openssl_speed", False),
            "cryptsetup": options.get("cryptsetup", False),
            "local_process": options.get("local_process") or "",
            **run_options.saturation_fields(options, values["arms"]),
            **run_options.auth_from_env(options),
            **run_options.client_cert_files(options),
        },
        project=project,
    )
    if not form.is_valid():
        raise CommandError(f"invalid options: {run_options.problems(form, run_options.RUN_OPTIONS)}")
    return form


def _create_run(
    owner, project, form: RunForm, ssh: SshAccessForm | None, options: dict, budgets: dict
) -> Run:
    data = form.cleaned_data
    # Every option was checked by the forms before this; one transaction all the same, so nothing
    # half-created stays behind whatever fails.
    with transaction.atomic():
        target = services.get_or_create_target(
            project, form.target_name_or_default(), data.get("plain_url"), data.get("tls_url")
        )
        if ssh is not None:
            _store_ssh(target, ssh, options.get("server_process") or "")
        if options.get("mtls_url") is not None and options["mtls_url"] != target.mtls_url:
            target.mtls_url = options["mtls_url"]
            target.save(update_fields=["mtls_url"])
        return services.create_run(
            owner,
            target,
            form.engine_config(),
            source="cli",
            secrets=form.secrets(),
            budgets=budgets,
            client_cert=form.client_cert(),
        )


def _execute(command: BaseCommand, run: Run) -> Run:
    # Ctrl-C cancels like the web button: the current arm stops and is kept.
    with interrupt.CancelOnCtrlC(run, command.stderr.write):
        # None: the run was not ours any more (cancelled while it waited for a generator).
        return runner.execute_when_free(run.pk, command.stderr.write) or Run.objects.get(pk=run.pk)


def print_report(command: BaseCommand, report: dict, as_json: bool) -> None:
    if as_json:
        command.stdout.write(json.dumps(report, indent=2))
        return
    width = max([12, *(len(name) for name in report["arms"])])  # matrix sub-arms are longer
    for name, arm in report["arms"].items():
        ttlb = arm["ttlb_us"] or {}
        command.stdout.write(
            f"{name:{width}} {arm['requests']:>9} req {arm['rps']:>10.1f} req/s  "
            f"TTLB p50 {ttlb.get('p50', 0) / 1000:8.2f} ms  p95 {ttlb.get('p95', 0) / 1000:8.2f} ms"
            + ("" if arm.get("complete", True) else "  (cut short)")
        )
    for row in report.get("answers") or []:  # the answer table, a line per question
        command.stdout.write(f"answer   {row['text']}")
    for line in report_lines(report):  # matrix refusals, advice, WAN projection
        command.stdout.write(line)
    verdicts = report.get("budgets")
    if verdicts:
        command.stdout.write(f"budgets: {verdicts['status']}")
        for item in verdicts["results"]:
            command.stdout.write(f"  {item['status']:4} {item['name']}: {item['detail']}")
    command.stdout.write(f"report: {report['run']['report_url']}")


def handle_run(command: BaseCommand, options: dict) -> None:
    owner = owner_named(options["owner"])
    if options.get("local_process") and not settings.TOLLGATE_LOCAL_PROBE:
        raise CommandError(
            "--local-process: the local process probe is off on this installation (it samples the "
            "worker's own machine); an operator turns it on with TOLLGATE_LOCAL_PROBE=1"
        )
    project = projects.project_for_run(owner, options["project"])
    try:
        budgets = budgetlib.parse(options["budget"])
    except budgetlib.BudgetError as exc:
        raise CommandError(f"--budget: {exc}") from None
    form = _run_form(options, project)
    ssh = _ssh_form(options)
    if options.get("mtls_url") is not None:
        url_form = MtlsUrlForm({"mtls_url": options["mtls_url"]})
        if not url_form.is_valid():
            raise CommandError(f"invalid options: --mtls-url: {' '.join(url_form.errors['mtls_url'])}")
        options["mtls_url"] = url_form.cleaned_data["mtls_url"]
    run = _create_run(owner, project, form, ssh, options, budgets)
    per_arm_s = form.cleaned_data["warmup_s"] + form.cleaned_data["duration_s"]
    command.stderr.write(f"run {run.code}: {', '.join(run.arm_names)}, about {per_arm_s:.0f} s per arm")
    started = time.monotonic()
    run = _execute(command, run)
    # The report as downloaded: the frozen, signed one once the run has ended.
    report = reporting.export_report(run)
    print_report(command, report, options["json"])
    invalid = report["run"].get("invalid_arms") or {}
    badge = evidence.status_badge(run.status, report["run"].get("checks"), list(invalid))
    said = evidence.status_text(run.status, run.error, badge)
    command.stderr.write(f"run {run.code} {said} in {time.monotonic() - started:.1f} s")
    if run.error_detail:  # the rest of the reason: its first line is in the status line
        command.stderr.write(f"error: {run.error_detail}")
    if run.library_said:  # the TLS library's own text behind the reason in words
        command.stderr.write(f"the TLS library said: {run.library_said}")
    for name, why in invalid.items():
        command.stderr.write(f"arm {name} is invalid: {why}")
    verdicts = report.get("budgets") or {}
    if verdicts:  # on stderr too, so a CI log with --json says why it exits 3
        unmet = [f"{r['name']} {r['status']}" for r in verdicts["results"] if r["status"] != budgetlib.PASS]
        command.stderr.write(f"budgets {verdicts['status']}" + (f": {', '.join(unmet)}" if unmet else ""))
    if run.status == Run.Status.INCOMPLETE:
        sys.exit(EXIT_INCOMPLETE)
    if run.status != Run.Status.SUCCEEDED:
        sys.exit(EXIT_RUN_FAILED)
    if verdicts.get("status") == budgetlib.FAIL:
        sys.exit(EXIT_BUDGET_FAILED)


def handle_check_target(command: BaseCommand, options: dict) -> None:
    """Resolve the URL's host and judge it, as the run form and the worker do; exit 1 when refused."""
    decision = outbound.check_url(options["url"])
    if options["json"]:
        command.stdout.write(json.dumps(decision.as_dict(), indent=2))
    else:
        command.stdout.write(f"{'allowed' if decision.allowed else 'refused'}: {decision.reason}")
    if not decision.allowed:
        sys.exit(EXIT_RUN_FAILED)


def report_lines(report: dict) -> list[str]:
    """The matrix's refusals, the advice and the WAN projection as ``tollgate run`` prints them
    without ``--json`` (the arms' lines come before; measured sub-arms are among them)."""
    lines = [
        f"refused  {m['arm']}: {m.get('detail_words') or m['detail']}"
        for m in report.get("matrix") or []
        if m["status"] == "refused"
    ]
    for item in report.get("advice") or []:
        low_high = item["ci95"]
        # No verdict without an interval (portal.lib.stats.costs.UNCONFIRMED).
        ci = (
            f"95% CI {low_high[0] / 1000:.3f} … {low_high[1] / 1000:.3f} ms, {item['verdict']}"
            if low_high
            else f"unconfirmed: {UNCONFIRMED}"
        )
        saving = item["saving_us"] / 1000
        # The hybrid's item is a price (its time over the classical group's, either sign), not a saving.
        said = f"costs {saving:+.3f}" if item.get("hybrid") else f"saves {saving:.3f}"
        lines.append(f"advice   {item['title']}: {said} ms TTLB per request ({ci})")
        if item.get("hybrid"):
            lines.append(f"         {advice.hybrid_words(item['hybrid']).strip()}")
    rows = report.get("wan") or []
    if rows:
        rtts = list(dict.fromkeys(row["rtt_ms"] for row in rows))
        formula = (report.get("wan_model") or {}).get("formula", wan.FORMULA)
        lines.append(f"WAN      {formula}; projected TTLB (ms) at RTT")
        lines.append(f"  {'arm':28} {'round trips':>11} " + " ".join(f"{rtt:>9g} ms" for rtt in rtts))
        for name in dict.fromkeys(row["arm"] for row in rows):
            mine = [row for row in rows if row["arm"] == name]
            cells = " ".join(f"{row['projected_ttlb_ms']:>12.3f}" for row in mine)
            lines.append(f"  {name:28} {mine[0]['round_trips']:>11g} {cells}")
    return lines + capacity.report_lines(report)
