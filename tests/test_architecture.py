"""The layout of docs/architecture.md, checked: one direction between portal and workers and between
the portal's apps (the doc's picture is this file's scan), a Django-free portal/lib, no folder crowded
with modules, no function too complex, no private helpers borrowed across apps.

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
# Cohesion over a line count: a module holds one responsibility however long it is, a function stays
# readable (ruff's C901, max-complexity in pyproject.toml), and a folder keeps few enough modules side
# by side to be read as a list: more, and it is split into packages by role.
MAX_COMPLEXITY = 15
MAX_MODULES_PER_FOLDER = 20
# Folders still above it, with their count today: each may only shrink, and must leave this list once
# it fits (issue 33 groups them: portal/runs loses the console, workers/engine becomes packages).
CROWDED: dict[str, int] = {}
# What the web process must never load: the worker side and its heavy libraries.
WORKER_ONLY = ("workers.runner", "workers.driver", "workers.tasks", "workers.engine", "workers.probes")
HEAVY = ("paramiko", "locust", "gevent", "hdrh.log")
# The portal's only edges into workers/: the Celery app (to enqueue by name) and, for the console's
# ``tollgate run``, the runner (it executes the run in its own process, like a worker).
PORTAL_TO_WORKERS = {
    "portal/runs/dispatch.py": {"workers.celery_app"},
    "portal/console/run.py": {"workers"},
}
# The room that assembles every app (the ``tollgate`` command, its sub-commands, the demo): it may
# import any app and no app imports it, so it is drawn above them all.
CONSOLE = "console"
# Pairs of apps that import each other, each named and justified in docs/architecture.md; any other
# pair fails test_apps_import_each_other_one_way.
BOTH_WAYS = {
    frozenset({"runs", "scenarios"}),
}
# What the engine (its own process, no Django) takes from the portal: these portal/lib modules.
ENGINE_LIB = {
    "portal.lib.runs.protocol",
    "portal.lib.stats.capacity",
    "portal.lib.stats.saturation",
    "portal.lib.stats.generators",
    "portal.lib.tls.matrix",
    "portal.lib.tls.clientcerts",
}
DIAGRAM_HEADING = "## The apps and their arrows"
LIB_HEADING = "### `portal/lib/`, by domain"


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


def test_no_function_is_too_complex():
    """ruff's C901 (mccabe) with pyproject.toml's limit, over the whole tree as ``ruff check`` sees it:
    a function with more paths through it than a reader holds at once is split by what each part does."""
    config = (ROOT / "pyproject.toml").read_text()
    assert f"max-complexity = {MAX_COMPLEXITY}" in config and '"C901"' in config
    command = [sys.executable, "-m", "ruff", "check", "--select", "C901", "--output-format", "concise", "."]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)  # noqa: S603
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _folders(*tops: str) -> dict[str, int]:
    """Each folder of product code (migrations aside) and how many modules it holds side by side
    (``__init__.py`` is the folder itself, not one of them)."""
    counts = {}
    for top in tops:
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if "migrations" in folder.parts or "__pycache__" in folder.parts:
                continue
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if modules:
                counts[str(folder.relative_to(ROOT))] = len(modules)
    return counts


def test_no_folder_is_crowded():
    counts = _folders("portal", "workers")
    crowded = {folder: n for folder, n in counts.items() if n > MAX_MODULES_PER_FOLDER}
    grown = {folder: n for folder, n in crowded.items() if n > CROWDED.get(folder, MAX_MODULES_PER_FOLDER)}
    assert not grown, f"more than {MAX_MODULES_PER_FOLDER} modules side by side (group them by role): {grown}"
    fits = sorted(set(CROWDED) - set(crowded))
    assert not fits, f"no longer crowded, drop from CROWDED: {fits}"


def test_the_folder_count_sees_every_product_package():
    # Not vacuous: the count reaches into packages (portal/lib's) and skips migrations.
    counts = _folders("portal", "workers")
    assert counts["portal/lib/stats"] == len(list((ROOT / "portal/lib/stats").glob("*.py"))) - 1
    assert not any("migrations" in folder for folder in counts)
    assert counts["portal"] > 0 and counts["workers/probes"] > 0


def _modules_taken(node: ast.AST, module: str) -> list[str]:
    """The modules an import takes: ``from portal.lib.stats import capacity`` takes
    ``portal.lib.stats.capacity``, ``from portal.lib.runs.protocol import emit`` takes the protocol."""
    if isinstance(node, ast.ImportFrom):
        package = ROOT.joinpath(*module.split("."))
        if package.is_dir():
            return [f"{module}.{alias.name}" for alias in node.names]
    return [module]


def test_the_engine_takes_only_its_lib_modules_from_the_portal():
    for path in _sources("workers/engine"):
        for module, node, _ in _imports(path):
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            for taken in _modules_taken(node, module):
                assert taken.split(".")[0] != "portal" or taken in ENGINE_LIB, f"{where} imports {taken}"
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
    """Every portal app and the apps its modules import: every module of every app (migrations
    aside)."""
    edges: dict[str, set[str]] = {}
    for path in _sources("portal"):
        rel = path.relative_to(ROOT)
        app = _app(".".join(rel.with_suffix("").parts))
        if app is None:
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


def test_only_the_console_imports_every_app_and_no_app_imports_it():
    edges = app_edges()
    importers = sorted(app for app, reached in edges.items() if CONSOLE in reached)
    assert importers == [], f"these apps import the console: {importers}"
    assert diagram().splitlines()[-1].startswith(CONSOLE), "the console is drawn above every app"


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


def _lib_section() -> str:
    doc = (ROOT / "docs/architecture.md").read_text()
    return doc.split(LIB_HEADING, 1)[1].split("\n### ", 1)[0]


def test_the_docs_table_of_portal_lib_names_every_module():
    """Each row is a package and its modules (the package named on its first row only), or a module
    of portal/lib itself; every module of the tree is named, every name is a module."""
    named, package = set(), ""
    for line in _lib_section().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not line.startswith("| `") and not line.startswith("| |"):
            continue
        first = cells[0].split("`")[1] if cells[0] else package
        if first.endswith("/"):
            package = first
            named |= {package + name for name in cells[1].split("`")[1::2] if name.endswith(".py")}
        else:
            named.add(first)
    tree = {str(p.relative_to(ROOT / "portal/lib")) for p in (ROOT / "portal/lib").rglob("*.py")}
    tree -= {"__init__.py"} | {p for p in tree if p.endswith("/__init__.py") and p != "validity/__init__.py"}
    assert named == tree, f"not in the doc: {sorted(tree - named)}; not in the tree: {sorted(named - tree)}"


def test_a_features_pure_half_and_its_app_half_share_a_name():
    section = _lib_section().split("| feature |", 1)[1]
    pairs = [line.split("|")[2:4] for line in section.splitlines()[2:] if line.startswith("| ")]
    assert len(pairs) == 8
    for lib_cell, app_cell in pairs:
        lib, app = lib_cell.split("`")[1], app_cell.split("`")[1]
        assert (ROOT / lib).is_file() and (ROOT / app).exists(), (lib, app)
        assert Path(lib).stem == Path(app.rstrip("/")).stem, f"{lib} and {app} are one feature: one name"


if __name__ == "__main__":
    print(diagram())
