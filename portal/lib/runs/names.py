"""Names users give Tollgate that end up on a command line: one rule, Django-free.

A process name is what ``pgrep -x -- NAME`` matches: the kernel's ``comm``, at most 15 bytes. The
rule is checked by the run and SSH forms, the ``SshAccess`` model, the CLI (through the forms) and,
once more, by the sampler that builds the shell command (``workers/probes/ssh.py``).
"""

from __future__ import annotations

import re

PROCESS_NAME_MAX = 15  # TASK_COMM_LEN - 1: pgrep -x compares against the truncated comm
# Letters, digits and ._:+- only; never a leading "-", which pgrep (or anything else) could read as
# an option. fullmatch: "$" alone would let a trailing newline through.
PROCESS_NAME = re.compile(rf"[A-Za-z0-9_.:+][A-Za-z0-9_.:+-]{{0,{PROCESS_NAME_MAX - 1}}}")
PROCESS_NAME_RULE = (
    f"A process name: letters, digits and ._:+- only, not starting with -, at most {PROCESS_NAME_MAX} "
    "characters (the name pgrep -x sees)."
)


def process_name_problem(name: object) -> str | None:
    """Why ``name`` is not a process name to sample, or None when it is one."""
    if not isinstance(name, str) or not PROCESS_NAME.fullmatch(name):
        return PROCESS_NAME_RULE
    return None


def check_process_name(name: object) -> str:
    """``name`` if it is a valid process name; ValueError with the rule otherwise."""
    problem = process_name_problem(name)
    if problem:
        raise ValueError(f"{name!r} is refused. {problem}")
    return name  # type: ignore[return-value]
