"""A run's stored config vs. what the engine gets: secrets are sealed in one and opened for the other.

``Run.config`` holds the engine config (``portal.lib.runs.protocol.EngineConfig``) without any secret,
plus three portal-only keys:

* ``secrets``: a Fernet token (``portal.lib.security.secrets``) of ``{"headers": {...}, "auth": {...},
  "client_certs": {key type: {"cert", "key"}}}`` (the target's client certificates, when the run
  presents one: ``portal.lib.tls.clientcerts.needs_client_cert``);
* ``client_certs``: ``{key type: facts}`` of those certificates (subject, issuer, expiry,
  fingerprint: public; the engine's ``client_certs`` are the sealed pairs);
* ``auth``: ``{"type": "basic"|"bearer"}``: which credentials were sealed (the Basic user name is
  half a credential: it stays in ``secrets`` only; runs stored before carried it here, migration
  runs 0026 took it out);
* ``header_names``: the names of the sealed headers, for the report;
* ``probes``: which server-side probes to run (``workers.probes.session``);
* ``budgets``: ``{budget name: limit}`` (``portal.lib.report.budgets``), judged in the report, not the
  engine's;
* ``wan_rtt_ms``: the RTTs of the report's WAN projection (``portal.lib.stats.wan``).

The engine config with the real headers exists only in memory, on its way to the engine's stdin.
"""

from __future__ import annotations

import base64

from portal import vault

SECRET_KEYS = ("secrets", "auth", "header_names", "client_certs")
PORTAL_ONLY_KEYS = (*SECRET_KEYS, "probes", "budgets", "wan_rtt_ms")


def seal_into(config: dict, sealed: dict) -> dict:
    """Return ``config`` with the secrets (headers, auth) encrypted into it."""
    config = {key: value for key, value in config.items() if key not in SECRET_KEYS}
    config.pop("headers", None)
    headers = sealed.get("headers") or {}
    auth = sealed.get("auth")
    pairs = sealed.get("client_certs") or {}
    if headers or auth or pairs:
        config["secrets"] = vault.seal({"headers": headers, "auth": auth, "client_certs": pairs})
        config["header_names"] = sorted(headers)
        if auth:
            config["auth"] = {"type": auth["type"]}
    if pairs:
        config["client_certs"] = sealed.get("client_cert_facts") or {kind: {} for kind in pairs}
    return config


def authorization(auth: dict) -> str:
    if auth["type"] == "basic":
        token = base64.b64encode(f"{auth['user']}:{auth['secret']}".encode()).decode("ascii")
        return f"Basic {token}"
    if auth["type"] == "bearer":
        return f"Bearer {auth['secret']}"
    raise ValueError(f"unknown auth type {auth['type']!r}")


def engine_dict(config: dict, *, with_secrets: bool = False) -> dict:
    """The engine's config: portal-only keys dropped; with_secrets adds the real headers."""
    out = {key: value for key, value in config.items() if key not in PORTAL_ONLY_KEYS}
    if with_secrets and config.get("secrets"):
        opened = vault.unseal(config["secrets"])
        headers = dict(opened.get("headers") or {})
        if opened.get("auth"):
            headers["Authorization"] = authorization(opened["auth"])
        out["headers"] = headers
        if opened.get("client_certs"):
            out["client_certs"] = opened["client_certs"]
    return out


def public_config(config: dict) -> dict:
    """What the report and the page may show: no token, header values hidden, of the credentials
    only their type (the Basic user name is half a credential, and the report is shared)."""
    out = {key: value for key, value in config.items() if key != "secrets"}
    out["headers"] = {name: "(encrypted)" for name in config.get("header_names", [])}
    out.pop("header_names", None)
    if config.get("auth"):
        out["auth"] = {"type": config["auth"]["type"]}
    return out
