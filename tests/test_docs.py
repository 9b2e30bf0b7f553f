"""Docs that run as written: every shell block of README.md and docs/*.md is run against a demo, or
says why not.

A shell block is a fenced block marked ``sh``, ``bash`` or ``shell``, or an indented code block
(every fenced block names its language, so none hides). A block whose first line is
``# not run by the doc tests: <why>`` is skipped with that reason (it needs PostgreSQL and Redis, a
public target, Docker, minutes of load, …): the reader sees it too. Every other block runs, in order,
in one shell session per file — as a reader pastes them into one terminal: a variable set by one
block (``RUN=$(… | jq -r .run.id)``) is there for the next, and ``set -euo pipefail`` makes any
failing command fail the block.

The demo is ``make demo``'s command (``manage.py tollgate demo``), started once for this module on
free ports with its own ``TOLLGATE_VAR_DIR`` — never 8000/8081/8443/8444, which other demos on this
machine use. What the test changes in a block, and nothing else: the documented demo addresses
``127.0.0.1:8000``, ``:8081``, ``:8443`` and ``:8444`` (the target's mTLS port) become the test
demo's ports. Each session starts from a
bare environment (``PATH`` with the virtualenv first, as ``. .venv/bin/activate`` gives, ``HOME``,
``LANG``) plus the line the demo's banner prints for the CLI, pasted as the README says. The blocks
run in a scratch directory that holds the checkout's files (symlinks), so the files they write
(``report.json``, ``keys.json``) stay out of the checkout."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"sh", "bash", "shell"}
NOT_RUN = "# not run by the doc tests:"
DEMO_PORTS = {"web": 8000, "plain": 8081, "tls": 8443, "mtls": 8444}
BANNER_ENV = "first paste:"
BLOCK_TIMEOUT_S = 240


@dataclass
class Block:
    path: Path
    line: int
    language: str  # "" for an indented block
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES or self.language == "(indented)"

    @property
    def not_run_because(self) -> str | None:
        first = self.text.lstrip("\n").splitlines()[0] if self.text.strip() else ""
        return first[len(NOT_RUN) :].strip() if first.startswith(NOT_RUN) else None


def blocks(path: Path) -> list[Block]:
    found = []
    for token in MarkdownIt("commonmark").parse(path.read_text()):
        if token.type == "fence":
            language = token.info.strip().split()[0] if token.info.strip() else ""
        elif token.type == "code_block":
            language = "(indented)"
        else:
            continue
        found.append(Block(path, token.map[0] + 1, language, token.content))
    return found


def shell_blocks(path: Path) -> list[Block]:
    return [block for block in blocks(path) if block.is_shell]


def test_every_fenced_block_names_its_language():
    """A fenced block without a language could be a shell block nobody runs: ``text`` says it is not."""
    unnamed = [block.where for path in DOCS for block in blocks(path) if block.language == ""]
    assert not unnamed, f"fenced blocks without a language (sh, json, text, …): {unnamed}"


def test_every_skipped_block_says_why():
    empty = [b.where for path in DOCS for b in shell_blocks(path) if b.not_run_because == ""]
    assert not empty, f"'{NOT_RUN}' without a reason: {empty}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _bare_environment() -> dict[str, str]:
    """What a reader's new terminal has, with the virtualenv active: no TOLLGATE_*, no database."""
    return {
        "PATH": f"{ROOT / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``make demo``'s command on free ports, in a directory of its own; yields its ports and the
    environment line its banner prints."""
    var = tmp_path_factory.mktemp("demo-var")
    ports = {role: _free_port() for role in DEMO_PORTS}
    out = var / "demo.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(  # noqa: S603 - this interpreter, our own command
            [sys.executable, "manage.py", "tollgate", "demo", "--port", str(ports["web"])]
            + ["--plain-port", str(ports["plain"]), "--tls-port", str(ports["tls"])]
            + ["--mtls-port", str(ports["mtls"])],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**_bare_environment(), "TOLLGATE_DEMO": "1", "TOLLGATE_VAR_DIR": str(var)},
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "Ctrl-C stops everything." not in out.read_text(errors="replace"):
            assert proc.poll() is None, f"the demo exited with {proc.returncode}:\n{out.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the demo is not up after 180 s:\n{out.read_text()[-3000:]}"
            time.sleep(0.5)
        lines = out.read_text().splitlines()
        environment = next(lines[i + 1].strip() for i, line in enumerate(lines) if line.endswith(BANNER_ENV))
        yield {"ports": ports, "environment": environment, "proc": proc, "var": var}
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C, as the README says
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _rewrite_ports(text: str, ports: dict[str, int]) -> str:
    for role, documented in DEMO_PORTS.items():
        text = re.sub(rf"\b127\.0\.0\.1:{documented}\b", f"127.0.0.1:{ports[role]}", text)
    return text


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory that looks like the checkout (its files symlinked) for the blocks to run in."""
    work = tmp_path_factory.mktemp("docs-cwd")
    for entry in ROOT.iterdir():
        if entry.name not in ("var", "tests", ".git"):
            (work / entry.name).symlink_to(entry)
    return work


def _run_session(cwd: Path, state: Path, text: str) -> subprocess.CompletedProcess:
    script = (
        f'set -a\n. "{state}"\ncd "{cwd}"\ntrap \'export -p > "{state}"\' EXIT\nset -euo pipefail\n{text}\n'
    )
    return subprocess.run(  # noqa: S603 - bash from the machine, the docs' own blocks
        ["bash", "--noprofile", "--norc", "-c", script],
        capture_output=True,
        text=True,
        env=_bare_environment(),
        timeout=BLOCK_TIMEOUT_S,
    )


def _demo_state(demo: dict) -> str:
    """What the demo says about itself, for a failed block: whether it still runs, the end of its
    output (it names a process that exited and stopped it) and of each of its logs."""
    proc, var = demo["proc"], demo["var"]
    state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
    parts = [f"--- the demo ({state}), its output\n{(var / 'demo.out').read_text(errors='replace')[-1500:]}"]
    for log in sorted((var / "logs").glob("*.log")):
        if not log.name.startswith("demo-target-access"):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


@pytest.mark.parametrize("path", [p for p in DOCS if shell_blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_blocks_run_as_written(path, demo, scratch, tmp_path):
    state = tmp_path / "session.sh"
    state.write_text("")
    first = _run_session(scratch, state, demo["environment"])  # the banner's line, pasted
    assert first.returncode == 0, first.stderr
    skipped, ran = [], 0
    for block in shell_blocks(path):
        if block.not_run_because is not None:
            skipped.append(f"{block.where}: {block.not_run_because}")
            continue
        proc = _run_session(scratch, state, _rewrite_ports(block.text, demo["ports"]))
        assert proc.returncode == 0, (
            f"{block.where} exited with {proc.returncode}:\n{block.text}\n"
            f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}\n{_demo_state(demo)}"
        )
        ran += 1
    if not ran:
        pytest.skip("; ".join(skipped))
