"""Every field of the engine's config is read by engine code. A run option declared in ``RunSpec``
with ``engine=True`` becomes an ``EngineConfig`` field that the form, the API and the CLI accept and
store; if nothing under ``workers/engine`` reads it, the run is measured as if it had not been given,
and no other test notices (docs/architecture.md, "What a new option touches")."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from pydantic import create_model

from portal.lib.runs import protocol, runspec

ENGINE = Path(__file__).resolve().parents[2] / "workers" / "engine"
# How engine code names a config it reads: ``config.users``, ``cfg.users``, ``self.config.users``,
# ``swarm.config.users``.
CONFIG_NAMES = {"config", "cfg"}


def fields_read(root: Path = ENGINE) -> dict[str, list[str]]:
    """Each config attribute read under ``root`` and where (``path:line``), from an AST scan."""
    reads: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
                continue
            base = node.value
            named = isinstance(base, ast.Name) and base.id in CONFIG_NAMES
            owned = isinstance(base, ast.Attribute) and base.attr in CONFIG_NAMES
            if named or owned:
                reads.setdefault(node.attr, []).append(f"{path.relative_to(root)}:{node.lineno}")
    return reads


def unread(config_class: type) -> list[str]:
    read = fields_read()
    return [field.name for field in dataclasses.fields(config_class) if field.name not in read]


def test_every_engine_config_field_is_read_by_the_engine():
    assert unread(protocol.EngineConfig) == []


def test_an_option_the_engine_never_reads_is_caught():
    """The check itself: a new engine option in a copy of the spec, read by no engine module, is named."""
    extra = runspec._field(0, ge=0, le=9, label="Dummy", help="Read by nobody.", engine=True)
    spec = create_model("SpecWithADummy", __base__=runspec.RunSpec, dummy_option=(int, extra))
    wider = protocol.config_class(runspec.options(spec))
    assert "dummy_option" in {field.name for field in dataclasses.fields(wider)}
    assert unread(wider) == ["dummy_option"]


def test_the_scan_sees_each_way_engine_code_reads_its_config(tmp_path):
    (tmp_path / "reads.py").write_text(
        "def f(config, cfg, swarm):\n"
        "    config.users = 3\n"  # a write is not a read
        "    return cfg.rounds, swarm.config.h2_streams, config.tls_matrix\n"
    )
    assert set(fields_read(tmp_path)) == {"rounds", "h2_streams", "tls_matrix"}


def test_the_engine_takes_its_settings_from_its_config_not_its_environment():
    """What a run's engine needs comes on its stdin (``EngineConfig``: the executor sets the operator's
    distributed-run settings there, workers/driver.py), never beside it in environment variables."""
    reads = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            environ = isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb")
            if environ or (isinstance(node, ast.Name) and node.id in ("environ", "getenv")):
                reads.append(f"{path.relative_to(ENGINE)}:{node.lineno}")
    assert reads == []
