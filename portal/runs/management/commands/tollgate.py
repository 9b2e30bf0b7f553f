"""``manage.py tollgate run|check-target|demo|demo-target``: benchmarks from the command line, the
outbound policy's decision for a URL, and the demo stack."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from portal import outbound, vault
from portal.alerts import services as alert_services
from portal.api import cli as api_cli
from portal.audit import log as audit_log
from portal.hooks import cli as hooks_cli
from portal.hooks import services as hooks_services
from portal.lib.report import budgets as budgetlib
from portal.lib.report import evidence
from portal.ops import cli as ops_cli
from portal.projects import cli as project_cli
from portal.projects import user_cli
from portal.runs import reporting, services, tuning
from portal.runs.demo import DemoError, run_demo, start_demo_target, stop_processes
from portal.runs.forms import RunForm
from portal.runs.management import baseline_cli, cli_options, interrupt
from portal.runs.models import Run
from portal.scenarios import cli as scenarios_cli
from portal.scenarios.models import Scenario
from portal.schedules import cli as schedules_cli
from portal.sharing import cli as sharing_cli
from portal.signing import cli as signing_cli
from portal.signing import services as signing_services
from portal.targets.forms import MtlsUrlForm, SshAccessForm
from portal.targets.models import ClientCertificate, SshAccess
from portal.targets.sshaccess import save_ssh_access
from portal.validators import validate_text

# The CLI is an entry point like the Celery worker: `tollgate run` executes the run in this process
# (Ctrl-C cancels it), so it imports the worker side; the web process never does.
from workers import runner

EXIT_RUN_FAILED = 1
# A budget (--budget, docs/budgets.md) failed: the run itself succeeded.
EXIT_BUDGET_FAILED = 3
# The run measured, but none of the costs it asked for could be computed (its arms refused or
# invalid): status incomplete, no answer — a CI job must not go green on it (docs/ci.md).
EXIT_INCOMPLETE = 4
# Apps that add sub-commands: each has ACTIONS, add_arguments(sub) and handle(command, options).
APP_CLIS = (scenarios_cli, signing_cli, sharing_cli, api_cli, hooks_cli, baseline_cli, user_cli, ops_cli)
# Sub-commands of `tollgate scenario` that other apps add (scenarios_cli imports none of them).
SCENARIO_CLIS = (schedules_cli,)


class Command(BaseCommand):
    help = "Run a TLS-cost benchmark, or start the demo."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="benchmark through the engine, store the run, print the report")
        cli_options.add_run_arguments(run)
        cli_options.add_tuning_arguments(run.add_argument_group("TLS configuration matrix, WAN projection"))
        cli_options.add_saturation_arguments(run.add_argument_group("Capacity: saturation search"))
        cli_options.add_probe_arguments(run.add_argument_group("server probes over SSH"))
        check = sub.add_parser(
            "check-target", help="would the outbound address policy let a run reach URL? (sends it nothing)"
        )
        check.add_argument("url")
        check.add_argument("--json", action="store_true", help="print the decision as JSON")
        project_cli.add_arguments(sub)
        for app_cli in APP_CLIS:
            if app_cli is scenarios_cli:
                app_cli.add_arguments(sub, SCENARIO_CLIS)
            else:
                app_cli.add_arguments(sub)
        sub.add_parser(
            "rotate-secrets", help="re-encrypt every stored secret with the first key of TOLLGATE_SECRET_KEYS"
        )
        target = sub.add_parser(
            "demo-target", help="serve the demo site with Caddy over HTTP, HTTPS (h2, h3) and mTLS"
        )
        demo = sub.add_parser("demo", help="migrate, create the demo login, start web + worker + demo target")
        demo.add_argument("--port", type=int, default=8000)
        for parser in (target, demo):
            parser.add_argument("--host", default="127.0.0.1")
            parser.add_argument("--plain-port", type=int, default=8081)
            parser.add_argument("--tls-port", type=int, default=8443, help="TCP, and UDP for HTTP/3")
            parser.add_argument(
                "--mtls-port",
                type=int,
                default=None,
                help="asks for client certificates (default: TLS port + 1)",
            )

    def handle(self, *args, **options) -> None:
        # The audit log is the database's (the Audit log page); on a terminal its log lines are noise
        # after the command's own answer (the web and worker processes keep logging them).
        logging.getLogger(audit_log.LOGGER).propagate = False
        action = options["action"]
        for app_cli in APP_CLIS:
            if action in app_cli.ACTIONS:
                if app_cli is scenarios_cli:
                    app_cli.handle(self, options, SCENARIO_CLIS)
                else:
                    app_cli.handle(self, options)
                return
        if action == "run":
            self.handle_run(options)
        elif action == "check-target":
            self.handle_check_target(options)
        elif action == "project":
            self.stdout.write(project_cli.handle(options))
        elif action == "demo-target":
            self.handle_demo_target(options)
        elif action == "rotate-secrets":
            self.handle_rotate_secrets()
        elif action == "demo":
            try:
                run_demo(
                    self.stdout,
                    web_port=options["port"],
                    plain_port=options["plain_port"],
                    tls_port=options["tls_port"],
                    mtls_port=options["mtls_port"],
                    host=options["host"],
                )
            except DemoError as exc:
                raise CommandError(str(exc)) from None

    def _owner(self, username: str):
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

    @staticmethod
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
            raise CommandError(f"invalid options: {cli_options.problems(form, cli_options.SSH_OPTIONS)}")
        return form

    @staticmethod
    def _store_ssh(target, form: SshAccessForm, server_process: str) -> None:
        """The target's SSH access from the checked form: key encrypted, host key pinned if given."""
        try:
            save_ssh_access(target, form.cleaned_data, keep_process=not server_process)
        except ValidationError as exc:
            raise CommandError(f"invalid options: {'; '.join(exc.messages)}") from None

    def _run_form(self, options: dict, project) -> RunForm:
        """The same form as the web page validates the CLI's values (and the project's quota)."""
        values = cli_options.spec_values(options)  # the options of portal.lib.runs.runspec
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
                **cli_options.saturation_fields(options, values["arms"]),
                **cli_options.auth_from_env(options),
                **cli_options.client_cert_files(options),
            },
            project=project,
        )
        if not form.is_valid():
            raise CommandError(f"invalid options: {cli_options.problems(form, cli_options.RUN_OPTIONS)}")
        return form

    def _create_run(
        self, owner, project, form: RunForm, ssh: SshAccessForm | None, options: dict, budgets: dict
    ) -> Run:
        data = form.cleaned_data
        # Every option was checked by the forms before this; one transaction all the same, so nothing
        # half-created stays behind whatever fails.
        with transaction.atomic():
            target = services.get_or_create_target(
                project, form.target_name_or_default(), data.get("plain_url"), data.get("tls_url")
            )
            if ssh is not None:
                self._store_ssh(target, ssh, options.get("server_process") or "")
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

    def _execute(self, run: Run) -> Run:
        # Ctrl-C cancels like the web button: the current arm stops and is kept.
        with interrupt.CancelOnCtrlC(run, self.stderr.write):
            # None: the run was not ours any more (cancelled while it waited for a generator).
            return runner.execute_when_free(run.pk, self.stderr.write) or Run.objects.get(pk=run.pk)

    def _print_report(self, report: dict, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(report, indent=2))
            return
        width = max([12, *(len(name) for name in report["arms"])])  # matrix sub-arms are longer
        for name, arm in report["arms"].items():
            ttlb = arm["ttlb_us"] or {}
            self.stdout.write(
                f"{name:{width}} {arm['requests']:>9} req {arm['rps']:>10.1f} req/s  "
                f"TTLB p50 {ttlb.get('p50', 0) / 1000:8.2f} ms  p95 {ttlb.get('p95', 0) / 1000:8.2f} ms"
                + ("" if arm.get("complete", True) else "  (cut short)")
            )
        for row in report.get("answers") or []:  # the answer table, a line per question
            self.stdout.write(f"answer   {row['text']}")
        for line in tuning.report_lines(report):  # matrix refusals, advice, WAN projection
            self.stdout.write(line)
        verdicts = report.get("budgets")
        if verdicts:
            self.stdout.write(f"budgets: {verdicts['status']}")
            for item in verdicts["results"]:
                self.stdout.write(f"  {item['status']:4} {item['name']}: {item['detail']}")
        self.stdout.write(f"report: {report['run']['report_url']}")

    def handle_run(self, options: dict) -> None:
        owner = self._owner(options["owner"])
        if options.get("local_process") and not settings.TOLLGATE_LOCAL_PROBE:
            raise CommandError(
                "--local-process: the local process probe is off on this installation (it samples the "
                "worker's own machine); an operator turns it on with TOLLGATE_LOCAL_PROBE=1"
            )
        project = project_cli.project_for_run(owner, options["project"])
        try:
            budgets = budgetlib.parse(options["budget"])
        except budgetlib.BudgetError as exc:
            raise CommandError(f"--budget: {exc}") from None
        form = self._run_form(options, project)
        ssh = self._ssh_form(options)
        if options.get("mtls_url") is not None:
            url_form = MtlsUrlForm({"mtls_url": options["mtls_url"]})
            if not url_form.is_valid():
                raise CommandError(f"invalid options: --mtls-url: {' '.join(url_form.errors['mtls_url'])}")
            options["mtls_url"] = url_form.cleaned_data["mtls_url"]
        run = self._create_run(owner, project, form, ssh, options, budgets)
        per_arm_s = form.cleaned_data["warmup_s"] + form.cleaned_data["duration_s"]
        self.stderr.write(f"run {run.code}: {', '.join(run.arm_names)}, about {per_arm_s:.0f} s per arm")
        started = time.monotonic()
        run = self._execute(run)
        # The report as downloaded: the frozen, signed one once the run has ended.
        report = reporting.export_report(run)
        self._print_report(report, options["json"])
        invalid = report["run"].get("invalid_arms") or {}
        badge = evidence.status_badge(run.status, report["run"].get("checks"), list(invalid))
        said = evidence.status_text(run.status, run.error, badge)
        self.stderr.write(f"run {run.code} {said} in {time.monotonic() - started:.1f} s")
        if run.error_detail:  # the rest of the reason: its first line is in the status line
            self.stderr.write(f"error: {run.error_detail}")
        if run.library_said:  # the TLS library's own text behind the reason in words
            self.stderr.write(f"the TLS library said: {run.library_said}")
        for name, why in invalid.items():
            self.stderr.write(f"arm {name} is invalid: {why}")
        verdicts = report.get("budgets") or {}
        if verdicts:  # on stderr too, so a CI log with --json says why it exits 3
            unmet = [
                f"{r['name']} {r['status']}" for r in verdicts["results"] if r["status"] != budgetlib.PASS
            ]
            self.stderr.write(f"budgets {verdicts['status']}" + (f": {', '.join(unmet)}" if unmet else ""))
        if run.status == Run.Status.INCOMPLETE:
            sys.exit(EXIT_INCOMPLETE)
        if run.status != Run.Status.SUCCEEDED:
            sys.exit(EXIT_RUN_FAILED)
        if verdicts.get("status") == budgetlib.FAIL:
            sys.exit(EXIT_BUDGET_FAILED)

    def handle_check_target(self, options: dict) -> None:
        """Resolve the URL's host and judge it, as the run form and the worker do; exit 1 when refused."""
        decision = outbound.check_url(options["url"])
        if options["json"]:
            self.stdout.write(json.dumps(decision.as_dict(), indent=2))
        else:
            self.stdout.write(f"{'allowed' if decision.allowed else 'refused'}: {decision.reason}")
        if not decision.allowed:
            sys.exit(EXIT_RUN_FAILED)

    def handle_rotate_secrets(self) -> None:
        counts = {"runs": 0, "scenarios": 0}
        with transaction.atomic():
            for model, label in ((Run, "runs"), (Scenario, "scenarios")):
                for obj in (
                    model.objects.select_for_update().filter(config__has_key="secrets").only("pk", "config")
                ):
                    token = obj.config.get("secrets")
                    if not token:
                        continue
                    try:
                        obj.config["secrets"] = vault.rotate(token)
                    except vault.SecretError as exc:
                        raise CommandError(f"{label[:-1]} {obj.pk}: {exc}; nothing was changed") from None
                    model.objects.filter(pk=obj.pk).update(config=obj.config)
                    counts[label] += 1
            # Said together: "SSH key(s) and client certificate(s)".
            counts["ssh_keys"] = _rotate_field(SshAccess, "private_key_enc", "SSH key of target access")
            counts["ssh_keys"] += _rotate_field(ClientCertificate, "pair_enc", "client certificate")
            try:
                counts["signing_keys"] = signing_services.reseal_keys()
                counts["webhooks"] = hooks_services.rotate_stored_secrets()
                counts["alert_channels"] = alert_services.rotate_stored_secrets()
            except vault.SecretError as exc:
                raise CommandError(f"{exc}; nothing was changed") from None
        self.stdout.write(
            f"re-encrypted the secrets of {counts['runs']} run(s) and {counts['scenarios']} scenario(s) "
            f"and {counts['ssh_keys']} SSH key(s) and client certificate(s) "
            f"and {counts['signing_keys']} report-signing key(s) "
            f"and {counts['webhooks']} webhook secret(s) and {counts['alert_channels']} alert channel URL(s)"
        )

    def handle_demo_target(self, options: dict) -> None:
        target = start_demo_target(
            settings.VAR_DIR / "demo-target",
            host=options["host"],
            plain_port=options["plain_port"],
            tls_port=options["tls_port"],
            mtls_port=options["mtls_port"],
        )
        procs = target.procs
        self.stdout.write(
            f"demo target (Caddy): {target.plain_url} and {target.tls_url} (self-signed; HTTP/3 on UDP), "
            f"client certificates at {target.mtls_url} (var/demo-target/tls/client.crt, client.key)"
        )
        self.stdout.flush()
        try:
            while all(proc.poll() is None for proc in procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            stop_processes(procs)


def _rotate_field(model, field: str, what: str) -> int:
    """Seal each row's ``field`` again with the newest Fernet key (inside the caller's transaction):
    how many; a token no key opens stops everything (``CommandError`` naming the row)."""
    rotated = 0
    for row in model.objects.select_for_update().only("pk", field):
        try:
            token = vault.rotate(getattr(row, field))
        except vault.SecretError as exc:
            raise CommandError(f"{what} {row.pk}: {exc}; nothing was changed") from None
        model.objects.filter(pk=row.pk).update(**{field: token})
        rotated += 1
    return rotated
