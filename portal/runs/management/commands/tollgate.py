"""``manage.py tollgate run|demo|demo-target``: benchmarks from the command line, and the demo stack."""

from __future__ import annotations

import json
import signal
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.runs import execute, reporting, services
from portal.runs.forms import RunForm
from portal.runs.models import Run

EXIT_RUN_FAILED = 1


class Command(BaseCommand):
    help = "Run a TLS-cost benchmark, or start the demo."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="benchmark through the engine, store the run, print the report")
        run.add_argument("--plain-url", default="")
        run.add_argument("--tls-url", default="")
        run.add_argument("--arms", default="plain,tls,tls_new", help="comma-separated arm names")
        run.add_argument("--users", type=int, default=4)
        run.add_argument("--spawn-rate", type=float, default=4.0)
        run.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per arm (not measured)")
        run.add_argument("--duration", type=float, default=10.0, help="measured seconds per arm")
        run.add_argument("--insecure", action="store_true", help="do not verify the TLS certificate")
        run.add_argument("--owner", default="", help="username owning the run (default: first superuser)")
        run.add_argument("--name", default="", help="target name (default: the host)")
        run.add_argument("--json", action="store_true", help="print the report JSON on stdout")

        target = sub.add_parser("demo-target", help="serve the demo site over HTTP and HTTPS (Gunicorn)")
        target.add_argument("--host", default="127.0.0.1")
        target.add_argument("--plain-port", type=int, default=8081)
        target.add_argument("--tls-port", type=int, default=8443)

        demo = sub.add_parser("demo", help="migrate, create the demo login, start web + worker + demo target")
        demo.add_argument("--host", default="127.0.0.1")
        demo.add_argument("--port", type=int, default=8000)
        demo.add_argument("--plain-port", type=int, default=8081)
        demo.add_argument("--tls-port", type=int, default=8443)

    def handle(self, *args, **options) -> None:
        action = options["action"]
        if action == "run":
            self.handle_run(options)
        elif action == "demo-target":
            self.handle_demo_target(options)
        elif action == "demo":
            from portal.runs.demo import run_demo

            run_demo(
                self.stdout,
                web_port=options["port"],
                plain_port=options["plain_port"],
                tls_port=options["tls_port"],
                host=options["host"],
            )

    def _owner(self, username: str):
        users = get_user_model().objects
        if username:
            try:
                return users.get(username=username)
            except users.model.DoesNotExist:
                raise CommandError(f"no user named {username!r}") from None
        owner = users.filter(is_superuser=True, is_active=True).order_by("pk").first()
        if owner is None:
            raise CommandError("no superuser exists: create one (manage.py createsuperuser) or pass --owner")
        return owner

    def handle_run(self, options: dict) -> None:
        owner = self._owner(options["owner"])
        # The same form as the web page validates the CLI's values: one set of rules.
        form = RunForm(
            data={
                "target_name": options["name"],
                "plain_url": options["plain_url"],
                "tls_url": options["tls_url"],
                "arms": [arm.strip() for arm in options["arms"].split(",") if arm.strip()],
                "users": options["users"],
                "spawn_rate": options["spawn_rate"],
                "warmup_s": options["warmup"],
                "duration_s": options["duration"],
                "verify_tls": not options["insecure"],
            }
        )
        if not form.is_valid():
            problems = "; ".join(
                f"{'--' + name.replace('_', '-') if name != '__all__' else 'options'}: {' '.join(errors)}"
                for name, errors in form.errors.items()
            )
            raise CommandError(f"invalid options: {problems}")
        data = form.cleaned_data
        target = services.get_or_create_target(
            owner, form.target_name_or_default(), data.get("plain_url"), data.get("tls_url")
        )
        run = services.create_run(owner, target, form.engine_config(), source="cli")
        per_arm_s = data["warmup_s"] + data["duration_s"]
        self.stderr.write(f"run {run.code}: {', '.join(run.arm_names)}, about {per_arm_s:.0f} s per arm")
        previous = signal.getsignal(signal.SIGINT)

        def interrupt(signum, frame) -> None:
            # Ctrl-C cancels like the web button: the current arm stops and is kept.
            Run.objects.filter(pk=run.pk).update(cancel_requested=True)

        signal.signal(signal.SIGINT, interrupt)
        started = time.monotonic()
        try:
            run = execute.execute_run(run.pk)
        finally:
            signal.signal(signal.SIGINT, previous)
        report = reporting.run_report(run)
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            for name, arm in report["arms"].items():
                ttlb = arm["ttlb_us"] or {}
                self.stdout.write(
                    f"{name:12} {arm['requests']:>9} req {arm['rps']:>10.1f} req/s  "
                    f"TTLB p50 {ttlb.get('p50', 0) / 1000:8.2f} ms  p95 {ttlb.get('p95', 0) / 1000:8.2f} ms"
                )
            self.stdout.write(f"report: {report['run']['report_url']}")
        self.stderr.write(f"run {run.code} {run.status} in {time.monotonic() - started:.1f} s")
        if run.status != Run.Status.SUCCEEDED:
            self.stderr.write(f"error: {run.error}")
            sys.exit(EXIT_RUN_FAILED)

    def handle_demo_target(self, options: dict) -> None:
        from portal.runs.demo import start_demo_target, stop_processes

        procs = start_demo_target(
            settings.VAR_DIR / "demo-target",
            host=options["host"],
            plain_port=options["plain_port"],
            tls_port=options["tls_port"],
        )
        self.stdout.write(
            f"demo target: http://{options['host']}:{options['plain_port']}/1k and "
            f"https://{options['host']}:{options['tls_port']}/1k (self-signed)"
        )
        try:
            while all(proc.poll() is None for proc in procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            stop_processes(procs)
