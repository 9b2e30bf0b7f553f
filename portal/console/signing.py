"""``manage.py tollgate verify-report|report-keys``: check a downloaded report's signature, list and rotate
the report-signing keys."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from portal.lib.security import signing
from portal.signing import services

ACTIONS: tuple[str, ...] = ("verify-report", "report-keys")
EXIT_NOT_INTACT = 1


def add_arguments(sub) -> None:
    """Add this app's sub-parsers to ``sub`` (argparse sub-parsers of ``tollgate``)."""
    verify = sub.add_parser(
        "verify-report",
        help="check a downloaded report JSON against the published keys (exit 0 intact, 1 not)",
    )
    verify.add_argument("file", help="the report JSON as downloaded")
    verify.add_argument(
        "--keys",
        default="",
        help="the published keys: a file or an http(s) URL of /.well-known/tollgate-report-keys.json "
        "(default: this portal's own keys)",
    )
    keys = sub.add_parser("report-keys", help="list or rotate the report-signing keys")
    actions = keys.add_subparsers(dest="keys_action", required=True)
    listing = actions.add_parser("list", help="every key, active and retired (all stay published)")
    listing.add_argument("--json", action="store_true", help="print the published keys document")
    actions.add_parser("rotate", help="retire the active key (still published) and make a new one")


def handle(command: BaseCommand, options: dict) -> None:
    """Run the action ``options["action"]`` (one of ACTIONS); write to command.stdout/stderr;
    exit codes through sys.exit."""
    if options["action"] == "verify-report":
        verify_report(command, options["file"], options["keys"])
    elif options["keys_action"] == "rotate":
        new, old = services.rotate_key()
        retired = f"; {old.key_id} is retired and stays published" if old else ""
        command.stdout.write(f"new report-signing key {new.key_id}{retired}")
    elif options["json"]:
        command.stdout.write(json.dumps({"keys": services.published()}, indent=2))
    else:
        for key in services.published():
            state = f"retired {key['retired']}" if key["retired"] else "active"
            command.stdout.write(f"{key['key_id']}  {key['algorithm']}  created {key['created']}  {state}")


def verify_report(command: BaseCommand, path: str, keys_source: str) -> None:
    """Exit 0 (and say so) when the report is intact, 1 naming what fails."""
    try:
        report = signing.load_report(path)
        keys = signing.load_keys(keys_source) if keys_source else services.public_keys()
    except (ValueError, signing.KeysError) as exc:
        command.stderr.write(f"not verified: {exc}")
        sys.exit(EXIT_NOT_INTACT)
    problems = signing.verify(report, keys)
    if problems:
        for problem in problems:
            command.stderr.write(f"FAILED: {problem}")
        sys.exit(EXIT_NOT_INTACT)
    command.stdout.write(signing.intact_line(report[signing.INTEGRITY]))
