"""``manage.py tollgate healthcheck|record-bench``: readiness from the command line (a container's
healthcheck, a bare host's monitoring) and ``bench/generator``'s figures recorded for a host."""

from __future__ import annotations

import json
import socket
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from portal.lib.stats import hostcapacity
from portal.ops import checks
from portal.ops.models import GeneratorBench

ACTIONS: tuple[str, ...] = ("healthcheck", "record-bench")
EXIT_UNHEALTHY = 1


def add_arguments(sub) -> None:
    check = sub.add_parser(
        "healthcheck",
        help="ready: what /readyz checks; worker: a Celery worker of this host reported lately (exit 0 or 1)",
    )
    check.add_argument("what", choices=("ready", "worker"))
    check.add_argument("--json", action="store_true", help="print the checks as JSON")
    bench = sub.add_parser(
        "record-bench", help="record bench/generator's figures (its output's last line) for a generator host"
    )
    bench.add_argument("file", help="bench/generator's output (its last line is read), or - for stdin")
    bench.add_argument("--host", default="", help="the generator host (default: this host's generator name)")


def handle(command: BaseCommand, options: dict) -> None:
    if options["action"] == "record-bench":
        record_bench(command, options["file"], options["host"])
        return
    found = checks.readiness() if options["what"] == "ready" else [checks.worker_check()]
    if options["json"]:
        command.stdout.write(json.dumps({c.name: c.as_dict() for c in found}))
    else:
        for c in found:
            command.stdout.write(f"{c.name}: {'ok' if c.ok else 'FAILING'} ({c.detail})")
    if not all(c.ok for c in found):
        sys.exit(EXIT_UNHEALTHY)


def record_bench(command: BaseCommand, path: str, host: str) -> None:
    text = sys.stdin.read() if path == "-" else _read(path)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    try:
        figures = hostcapacity.bench_figures(json.loads(lines[-1]) if lines else {})
    except (ValueError, AttributeError) as exc:
        raise CommandError(f"{path}: {exc}") from None
    host = host or settings.TOLLGATE_GENERATOR_NAME or socket.gethostname()
    GeneratorBench.objects.update_or_create(
        host=host, defaults={"recorded": timezone.now(), "figures": figures}
    )
    command.stdout.write(json.dumps({"host": host, "figures": figures}))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None
