#!/usr/bin/env python3
import os
import sys


def offline_verification(args: list[str]) -> int | None:
    """``manage.py tollgate verify-report FILE --keys KEYS`` checks a report against a saved or
    published keys document with portal/lib/security/signing.py alone: no settings, secrets or database
    (docs/auditors.md). Without ``--keys`` it reads this portal's own keys: Django's way, below."""
    if args[:2] != ["tollgate", "verify-report"]:
        return None
    rest = args[2:]
    keys = [rest[i + 1] for i, arg in enumerate(rest[:-1]) if arg == "--keys"]
    keys += [arg.split("=", 1)[1] for arg in rest if arg.startswith("--keys=")]
    if not any(keys):
        return None
    from portal.lib.security import signing

    return signing.main(rest, prog="manage.py tollgate verify-report")


if __name__ == "__main__":
    code = offline_verification(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
