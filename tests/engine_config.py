"""One builder for the engine configurations the tests run: ``engine_config(arms, **overrides)``.

A test that starts the engine (directly, through the runner, the CLI or a portal page) gives it the
load it measures, as the tools that run the engine do (docs/engine-protocol.md): by default a closed
loop (``arrival_rate`` None) of one user, a short warm-up and window, certificates not verified (the
tests' servers hold self-signed ones). Each override is an ``EngineConfig`` field or one of a run's
portal-only keys (``probes``, ``budgets`` …, ``portal.runs.configs.PORTAL_ONLY_KEYS``); the result is
checked by ``EngineConfig.from_dict`` before it is returned, so a test never hands the engine (or the
portal) a config the engine would refuse — a test of a refusal writes its bad config by hand.
"""

from __future__ import annotations

from collections.abc import Mapping

from portal.lib.runs.protocol import EngineConfig
from portal.runs.configs import PORTAL_ONLY_KEYS

DEFAULTS = {
    "users": 1,
    "spawn_rate": 10,
    "warmup_s": 0.2,
    "duration_s": 1.0,
    "verify_tls": False,
    "arrival_rate": None,
}


def engine_config(arms: Mapping[str, str] | list[dict], **overrides) -> dict:
    """The run's config as a dict (what ``python -m workers.engine`` reads on stdin and
    ``services.create_run`` stores): ``arms`` as ``{name: url}`` in the run's order (or a list of
    ``{"name", "url"}``), the defaults above, then ``overrides``."""
    if isinstance(arms, Mapping):
        arms = [{"name": name, "url": url} for name, url in arms.items()]
    config = {"arms": list(arms), **DEFAULTS, **overrides}
    EngineConfig.from_dict({key: value for key, value in config.items() if key not in PORTAL_ONLY_KEYS})
    return config
