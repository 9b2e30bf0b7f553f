"""Saved scenarios and their sealed secrets: which origins the secrets were saved for.

A scenario's ``config`` holds the run form's cleaned values, its headers and credentials sealed in
``secrets`` and, next to them, ``secret_origins``: the origins (``scheme://host:port``) of the arms
they were saved with. A run started from the scenario reuses the sealed secrets only for those
origins; for any other the user must type them again (``RunForm.clean``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from portal import vault
from portal.lib.runs.protocol import ARM_SCHEMES
from portal.scenarios.models import Scenario

DEFAULT_PORTS = {"http": 80, "https": 443}
# Kept as typed by the user (the parsed forms are for the engine).
RAW_SCENARIO_FIELDS = ("paths", "expected_status")
# The Basic user name is half a credential: sealed with the password (``secrets["auth"]["user"]``),
# never in the scenario's clear values (scenarios migration 0003 took it out of those saved before).
SECRET_FIELDS = ("headers", "auth_user", "auth_secret")
SCENARIO_ONLY_KEYS = ("secrets", "secret_origins")  # in a scenario's config, not form values


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL, the port always written, the host in lower case."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{parts.port or DEFAULT_PORTS.get(parts.scheme, 0)}"


def arm_origins(config: dict) -> list[str]:
    """The origins an engine config's arms talk to, sorted."""
    return sorted({origin(arm["url"]) for arm in config.get("arms", [])})


@dataclass
class SavedSecrets:
    """A scenario's sealed secrets, opened, and the origins they belong to."""

    secrets: dict = field(default_factory=dict)
    origins: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, scenario: Scenario | None) -> SavedSecrets | None:
        config = scenario.config if scenario else {}
        if not config.get("secrets"):
            return None
        return cls(vault.unseal(config["secrets"]), secret_origins(scenario))

    def foreign(self, origins: list[str]) -> list[str]:
        """The origins among ``origins`` these secrets were not saved for."""
        return [item for item in origins if item not in self.origins]


def secret_origins(scenario: Scenario | None) -> list[str]:
    """The origins a scenario's sealed secrets were saved for ([] without secrets)."""
    config = scenario.config if scenario else {}
    if not config.get("secrets"):
        return []
    origins = config.get("secret_origins")
    if origins is None:  # saved before origins were recorded: the scenario's own URLs
        urls = [config.get("plain_url"), config.get("tls_url")]
        origins = sorted({origin(url) for url in urls if url})
    return list(origins)


def find_scenario(scenarios: QuerySet[Scenario], code: str | None) -> Scenario | None:
    """The scenario with that code among ``scenarios``; None when there is none or the code is no
    UUID at all (a typed or truncated link is not a server error)."""
    if not code:
        return None
    try:
        return scenarios.filter(code=code).first()
    except ValidationError:
        return None


def scenario_config(cleaned: dict, raw: dict, engine_config: dict, secrets: dict) -> dict:
    """What a scenario stores: the form's values for reuse; secrets only sealed, with their origins."""
    data = {k: v for k, v in cleaned.items() if k not in ("save_as", *SECRET_FIELDS)}
    for name in RAW_SCENARIO_FIELDS:
        data[name] = raw.get(name, "")
    if secrets:
        data["secrets"] = vault.seal(secrets)
        data["secret_origins"] = arm_origins(engine_config)
    return json.loads(json.dumps(data, default=str))


def http_arms(arms: list[str]) -> list[str]:
    return [arm for arm in arms if ARM_SCHEMES.get(arm) == "http"]
