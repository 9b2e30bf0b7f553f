"""The layout of docs/architecture.md, checked: one direction between portal and workers, a
Django-free portal/lib, small modules and functions, no private helpers borrowed across apps."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# What the web process must never load: the worker side and its heavy libraries.
WORKER_ONLY = ("workers.runner", "workers.driver", "workers.tasks", "workers.engine", "workers.probes")
HEAVY = ("paramiko", "locust", "gevent", "hdrh.log")
# The portal's only edges into workers/: the Celery app (to enqueue by name) and, for the operator's
# CLI, the runner (``tollgate run`` executes in its own process, like a worker).
PORTAL_TO_WORKERS = {
    "portal/runs/dispatch.py": {"workers.celery_app"},
    "portal/runs/management/commands/tollgate.py": {"workers"},
}


def _sources(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (ROOT / top).rglob("*.py") if "migrations" not in p.parts)


def _imports(path: Path) -> list[tuple[str, ast.AST, bool]]:
    """(module, node, at module level) for every import in the file."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, node, id(node) in top))
    return out


def _loaded_after(code: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "portal.settings"}
    script = (
        "import json, sys\n" + code + "\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({WORKER_ONLY + HEAVY!r}))))"
    )
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_web_process_loads_none_of_the_worker_side():
    loaded = _loaded_after(
        "import django; django.setup()\n"
        "from django.urls import get_resolver\n"
        "get_resolver().url_patterns  # imports every view module\n"
        "import portal.wsgi\n"
        "from portal.runs import dispatch  # the Celery app object itself may load"
    )
    assert loaded == []


def test_the_celery_worker_does_load_the_runner():
    # The other direction works: the worker finds its tasks (and so the check above is not vacuous).
    loaded = _loaded_after("import django; django.setup()\nimport workers.tasks")
    assert "workers.runner" in loaded and "workers.probes.ssh" in loaded and "paramiko" in loaded


def test_portal_lib_is_django_free_and_stands_alone():
    for path in _sources("portal/lib"):
        for module, node, _ in _imports(path):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert not module.startswith("django"), f"{where} imports {module}"
            assert not module.startswith("workers"), f"{where} imports {module}"
            if module.startswith("portal"):
                assert module.startswith("portal.lib"), f"{where} imports {module}"


def test_the_portal_reaches_workers_only_through_its_two_doors():
    for path in _sources("portal"):
        rel = str(path.relative_to(ROOT))
        reached = {module for module, _, _ in _imports(path) if module.split(".")[0] == "workers"}
        assert reached <= PORTAL_TO_WORKERS.get(rel, set()), f"{rel} imports {sorted(reached)}"


def test_no_project_import_hides_inside_a_function():
    allowed = {"workers/engine/__main__.py"}  # Locust must patch before the engine loads
    for path in _sources("portal", "workers"):
        rel = str(path.relative_to(ROOT))
        for module, node, top in _imports(path):
            if module.split(".")[0] in ("portal", "workers") and not top and rel not in allowed:
                pytest.fail(f"{rel}:{node.lineno} imports {module} inside a function")


def test_no_private_helper_is_imported_across_apps():
    def app_of(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] in ("portal", "workers") else parts[0]

    for path in _sources("portal", "workers"):
        rel = path.relative_to(ROOT).with_suffix("")
        own = app_of(".".join(rel.parts))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and app_of(node.module) != own:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{rel}:{node.lineno} borrows {private} from {node.module}"


def test_modules_and_functions_stay_small():
    too_long = []
    for path in _sources("portal", "workers"):
        text = path.read_text()
        rel = path.relative_to(ROOT)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{rel}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}(): {length} lines")
    assert too_long == []
