"""``manage.py tollgate …``: the operator's console. Each sub-command is a module of
``portal/console`` with ``ACTIONS`` (its sub-command names), ``add_arguments(sub)`` and
``handle(command, options)``; this command only assembles them."""

from __future__ import annotations

import logging

from django.core.management.base import BaseCommand, CommandParser

from portal.audit import log as audit_log
from portal.console import (
    baseline,
    demo,
    hooks,
    ops,
    projects,
    run,
    scenarios,
    secrets,
    sharing,
    signing,
    tokens,
    users,
)

# In the order `tollgate --help` lists them.
SUBCOMMANDS = (run, projects, scenarios, signing, sharing, tokens, hooks, baseline, users, ops, secrets, demo)


class Command(BaseCommand):
    help = "Run a TLS-cost benchmark, manage projects, scenarios, links and keys, or start the demo."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for module in SUBCOMMANDS:
            module.add_arguments(sub)

    def handle(self, *args, **options) -> None:
        # The audit log is the database's (the Audit log page); on a terminal its log lines are noise
        # after the command's own answer (the web and worker processes keep logging them).
        logging.getLogger(audit_log.LOGGER).propagate = False
        module = next(m for m in SUBCOMMANDS if options["action"] in m.ACTIONS)
        module.handle(self, options)
