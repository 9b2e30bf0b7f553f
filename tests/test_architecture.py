"""The layout of docs/architecture.md, checked: one direction between portal and workers and between
the portal's apps (the doc's picture is this file's scan), a Django-free portal/lib, small modules
and functions, no private helpers borrowed across apps.

``python tests/test_architecture.py`` prints the picture of the apps for the doc."""

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
# Declarations, not logic: RunSpec holds one field per run option, each with its bounds, labels and
# help, so it grows by a dozen lines with every option (its functions are held to the usual limit).
DECLARATION_MODULES = {"portal/lib/runspec.py": 700}
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


# The portal's entry points: they assemble every app (URLs, the tollgate CLI) and no app imports
# them, so they are no app's edges.
ENTRY_POINTS = {"portal/urls.py", "portal/wsgi.py", "portal/runs/management/commands/tollgate.py"}
# Pairs of apps that import each other, each named and justified in docs/architecture.md; any other
# pair fails test_apps_import_each_other_one_way.
BOTH_WAYS = {
    frozenset({"runs", "scenarios"}),
    frozenset({"hooks", "scenarios"}),
}
# What the engine (its own process, no Django) takes from the portal: these portal/lib modules.
ENGINE_LIB = {"portal.lib.protocol", "portal.lib.capacity", "portal.lib.saturation", "portal.lib.generators"}
ENGINE_LIB |= {"portal.lib.matrix", "portal.lib"}  # ``from portal.lib import capacity``
DIAGRAM_HEADING = "## The apps and their arrows"


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
        if len(text.splitlines()) > DECLARATION_MODULES.get(str(rel), MAX_MODULE_LINES):
            too_long.append(f"{rel}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}(): {length} lines")
    assert too_long == []


def test_the_engine_takes_only_its_lib_modules_from_the_portal():
    for path in _sources("workers/engine"):
        for module, node, _ in _imports(path):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            assert module.split(".")[0] != "portal" or module in ENGINE_LIB, f"{where} imports {module}"
            assert not module.startswith("django"), f"{where} imports {module}"


# The engine's parts below the run that drives them (docs/architecture.md, "The engine"): each imports
# only itself and the parts named here, never the run (``swarm``, ``preflight``, ``users``,
# ``saturation``, ``unreachable``, ``distribution``), so a new protocol or TLS feature stays a part.
ENGINE_PARTS = {"tls": set(), "http": {"tls"}, "matrix": {"http", "tls"}, "recording": {"http"}}


def test_the_engines_parts_import_only_the_parts_below_them():
    for part, below in ENGINE_PARTS.items():
        for path in _sources(f"workers/engine/{part}"):
            for module, node, _ in _imports(path):
                if module.split(".")[:2] != ["workers", "engine"]:
                    continue
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                reached = module.split(".")[2] if module.count(".") >= 2 else "(the run)"
                assert reached in below | {part}, f"{where} imports {module}"


def _app(module: str) -> str | None:
    """The portal app a module belongs to (``portal.runs.views`` → ``runs``); None for portal/lib,
    the portal's shared modules (``portal/outbound.py``, ``validators.py``, …) and the rest."""
    parts = module.split(".")
    if parts[0] != "portal" or len(parts) < 2 or parts[1] == "lib":
        return None
    return parts[1] if (ROOT / "portal" / parts[1]).is_dir() else None


def app_edges() -> dict[str, set[str]]:
    """Every portal app and the apps its modules import (entry points and migrations aside)."""
    edges: dict[str, set[str]] = {}
    for path in _sources("portal"):
        rel = path.relative_to(ROOT)
        app = _app(".".join(rel.with_suffix("").parts))
        if app is None or str(rel) in ENTRY_POINTS:
            continue
        reached = edges.setdefault(app, set())
        for module, _, _ in _imports(path):
            other = _app(module)
            if other and other != app:
                reached.add(other)
    return edges


def diagram() -> str:
    """The apps, lowest first (fewest apps below them), each with the apps it imports: ``→`` one way,
    ``⇄`` a pair of BOTH_WAYS."""
    edges = app_edges()

    def below(app: str, seen: frozenset = frozenset()) -> set[str]:
        found = set()
        for other in edges[app] - seen:
            found |= {other} | below(other, seen | {app})
        return found

    order = sorted(edges, key=lambda app: (len(below(app)), app))
    width = max(map(len, order))
    lines = []
    for app in order:
        arrows = [
            f"⇄ {o}" if app in edges.get(o, ()) else f"→ {o}" for o in sorted(edges[app], key=order.index)
        ]
        lines.append(f"{app:<{width}}  {'  '.join(arrows) or '(imports no other app)'}".rstrip())
    return "\n".join(lines)


def test_apps_import_each_other_one_way():
    edges = app_edges()
    both = {frozenset({a, b}) for a in edges for b in edges[a] if a in edges.get(b, ())}
    new = sorted(sorted(pair) for pair in both - BOTH_WAYS)
    assert not new, f"these apps import each other (make it one way, or justify it in the doc): {new}"
    assert both == BOTH_WAYS, (
        f"no longer both ways, drop from BOTH_WAYS: {sorted(map(sorted, BOTH_WAYS - both))}"
    )


def test_the_docs_picture_of_the_apps_is_the_scan():
    doc = (ROOT / "docs/architecture.md").read_text()
    after = doc.split(DIAGRAM_HEADING, 1)[1]
    drawn = after.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n")
    assert drawn == diagram(), (
        "docs/architecture.md's picture differs: python tests/test_architecture.py prints it"
    )
    for pair in BOTH_WAYS:
        assert all(f"`portal/{app}`" in after for app in pair), f"the doc does not justify {sorted(pair)}"


if __name__ == "__main__":
    print(diagram())
