"""The engine's contract: the config it reads on stdin and the JSON lines it writes on stdout.

Imported by both sides (the Celery task / CLI and the engine subprocess), so it must not import
Django or Locust. Documented in docs/engine-protocol.md.

stdout messages, one JSON object per line, each with a "type":
  hello     {"engine": {versions, host facts}}
  progress  {"arm", "arm_index", "arms_total", "phase": "warmup"|"measure", "elapsed_s", "rps", "users",
             "second": {"t_s", "requests", "p50_us", "p95_us"} | null}   second: the measured second just
                                                                          closed (null in the warm-up)
  server_software {"tls", "plain"}                      after every arm's preflight: the Server header
                                                        each URL answered with (null: none, or no arm)
  tls_info  {"arm", "info": {...}}                     TLS facts from one handshake (first TLS arm)
  matrix    {"arm", "variants": [{"name", "variant", "status", "detail", "negotiated"}]}
                                                        TLS matrix: each variant probed (tls_matrix)
  arm       {"arm", "round", "url", "result": {...}}  one per finished (or cut-short) arm and round;
                                                        result["stopped"]: why the engine stopped it
                                                        early (target unreachable), else null
  capacity  {"arm", "stage", "point": {...}}            saturation search: one per stage run
                                                        (portal.lib.stats.capacity.stage_point)
  refused   {"arm", "url", "reason"}                  an arm the server's protocols cannot serve (no h2
                                                        over ALPN, no HTTP/2 with prior knowledge, TLS on
                                                        a plain arm's port, no QUIC on the UDP port or no
                                                        h3 over ALPN): not measured, the others are
  arm_error {"arm", "error", "preflight"?, "url"?}      an arm's preflight failed (every arm is
                                                        preflighted before the first is measured;
                                                        "preflight": true), or an arm was stopped
                                                        (after its "arm"): the engine stops, exit code 3
  generator {"event": "joined"|"lost", "id", "host", "at_s", ...}  distributed runs (generators != 1):
                                                        a Locust worker process joined or was lost
  done      {"status": "succeeded"|"cancelled"}
"""

from __future__ import annotations

import copy
import ipaddress
import json
from dataclasses import asdict, dataclass, field, make_dataclass
from typing import IO
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, ValidationError, create_model

from portal.lib.runs.runoptions import Option
from portal.lib.runs.runspec import ARM_NAMES, MAX_GENERATORS, OPTIONS, parse_generators  # noqa: F401
from portal.lib.stats import saturation as saturation_plan
from portal.lib.tls import clientcerts, matrix

ARMS = ARM_NAMES
ARM_SCHEMES = {
    "plain": "http",
    "plain_new": "http",
    "tls": "https",
    "tls_new": "https",
    "tls_resumed": "https",
    "tls_mtls": "https",
    "h2": "https",
    "h2_new": "https",
    "h2c": "http",
    # HTTP/3: the TLS URL's host and port over UDP (or the port its Alt-Svc names; the preflight finds it).
    "h3": "https",
    "h3_new": "https",
    "h3_resumed": "https",
    "h3_0rtt": "https",
}
EXIT_OK = 0
EXIT_ARM_ERROR = 3
EXIT_BAD_CONFIG = 2


@dataclass
class ArmSpec:
    name: str
    url: str


@dataclass
class PathSpec:
    path: str
    weight: float = 1.0


# A distributed run's operator settings (docs/scaling.md): their defaults, declared here once for the
# engine's fields below and for the settings that set them (portal/settings_product.py).
MASTER_BIND = "127.0.0.1"  # TOLLGATE_MASTER_BIND: loopback, local generator processes only
GENERATOR_CONNECT_S = 30  # TOLLGATE_GENERATOR_CONNECT_S
OPERATOR_MAX_GENERATORS = 16  # TOLLGATE_MAX_GENERATORS: per generator host, at most MAX_GENERATORS

# The engine's own fields, after the run options: the portal fills them per run, a user never types them.
ENGINE_ONLY_FIELDS = (
    ("timeout_s", float, field(default=10.0)),  # per request
    # Sent on every request, so credentials go out pre-emptively (no 401 round trip): on the https
    # arms only, unless headers_over_http says the user allowed them over plain HTTP too. The run's
    # sealed headers and credentials, opened on their way to the engine's stdin (portal/runs/configs.py).
    ("headers", dict[str, str], field(default_factory=dict)),
    # The address to connect to per "host:port" (``pin_key``), checked by the outbound address policy
    # (portal/lib/security/netpolicy.py) at run start: the engine never resolves these hosts again, so DNS
    # rebinding cannot move the target mid-run. None: resolve (only tools that run the engine directly).
    ("pinned", dict[str, str] | None, field(default=None)),
    # Client certificates (portal/lib/tls/clientcerts.py), {"rsa"|"ecdsa": {"cert": PEM, "key": PEM}}: on the
    # engine's stdin only (the stored run config holds them sealed). The tls_mtls arm presents one
    # (clientcerts.arm_key_type), the matrix's client_cert variants each theirs; other arms none.
    ("client_certs", dict[str, dict], field(default_factory=dict)),
    # A resumption (workers/attempts.py): "arm#round" pairs an earlier attempt already measured; the
    # engine runs everything else, in the same order.
    ("skip", list[str], field(default_factory=list)),
    # Distributed runs (generators != 1), set by the executor (workers/driver.py) from the operator's
    # settings: the address and port the Locust master binds (0: a free port), how long it waits for
    # its generator processes, the cap on "auto" (generators 0: one per core up to it), and the other
    # generator hosts invited to join (their names, workers/generators.py), each waited for.
    ("master_bind", str, field(default=MASTER_BIND)),
    ("master_port", int, field(default=0)),
    ("generator_connect_s", float, field(default=float(GENERATOR_CONNECT_S))),
    ("max_generators", int, field(default=OPERATOR_MAX_GENERATORS)),
    ("remote_hosts", list[str], field(default_factory=list)),
)


def _option_field(opt: Option) -> tuple[str, object, object]:
    """A run option's ``EngineConfig`` field: its type and default as ``RunSpec`` declares them."""
    if isinstance(opt.default, (list, dict)):
        return opt.name, opt.engine_type, field(default_factory=lambda: copy.deepcopy(opt.default))
    return opt.name, opt.engine_type, field(default=opt.default)


class _EngineConfig:
    """What the engine reads on stdin: its arms (each with its URL), every run option of ``RunSpec``
    that the engine uses (``runspec.ENGINE_KEYS``, ``OPTION_KEYS`` here: each field's type, bounds
    and default declared there, once) and the engine's own fields (``ENGINE_ONLY_FIELDS``);
    docs/engine-protocol.md.

    A key left out takes ``RunSpec``'s default, the run form's (a paced open loop); tools that run
    the engine directly (benches, tests) give the load they want."""

    def validate(self) -> None:
        """The config as the engine may run it, or a ValueError saying what is wrong (the first thing
        found, in this order: arms, matrix words, options, paths, the matrix's arms, client
        certificates, generators, saturation, pinned addresses)."""
        self._check_arms()
        if self.tls_matrix:  # in the matrix's own words first ("unknown matrix dimension …")
            matrix.parse_dimensions(self.tls_matrix)
        self.tls_groups = matrix.parse_groups(self.tls_groups)  # "a,b" or a list, OpenSSL's names
        self._check_options()
        for spec in self.paths:
            if not spec.path.startswith("/"):
                raise ValueError(f"a path must start with /: {spec}")
        if self.tls_matrix and (why := matrix.needs_arm_error([arm.name for arm in self.arms])):
            raise ValueError(why)
        self._check_client_certs()
        if self.generators != 1 and self.tls_matrix:
            raise ValueError("the TLS matrix runs with one generator process (generators 1)")
        self.saturation = saturation_plan.normalise(self.saturation, [arm.name for arm in self.arms])
        self._check_pinned()

    def _check_arms(self) -> None:
        """At least one arm, each known, once, with a URL of its scheme."""
        if not self.arms:
            raise ValueError("no arms")
        seen = set()
        for arm in self.arms:
            if arm.name not in ARMS:
                raise ValueError(f"unknown arm {arm.name!r}")
            if arm.name in seen:
                raise ValueError(f"arm {arm.name!r} given twice")
            seen.add(arm.name)
            if not arm.url.startswith(ARM_SCHEMES[arm.name] + "://"):
                raise ValueError(f"arm {arm.name!r} needs an {ARM_SCHEMES[arm.name]}:// URL, got {arm.url!r}")

    def _check_client_certs(self) -> None:
        """Their shape: ``{"rsa"|"ecdsa": {"cert": PEM, "key": PEM}}``."""
        for kind, pair in self.client_certs.items():
            if (
                kind not in clientcerts.KEY_TYPES
                or not isinstance(pair, dict)
                or set(pair) != {"cert", "key"}
            ):
                raise ValueError(
                    f"client_certs: {{{'|'.join(clientcerts.KEY_TYPES)}: {{cert, key}}}} expected"
                )

    def _check_pinned(self) -> None:
        """When addresses are pinned, every arm's host:port has one, an IP address."""
        if self.pinned is None:
            return
        for arm in self.arms:
            address = self.pinned.get(pin_key(arm.url), "")
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise ValueError(f"no pinned address for {pin_key(arm.url)} (arm {arm.name!r})") from None

    def _check_options(self) -> None:
        """Each run option against its type and bounds in ``RunSpec`` (the engine's own where the field
        gives them); numbers given as other numbers (a float of users) take the field's type."""
        values = asdict(self)
        try:
            checked = self._checked.model_validate({key: values[key] for key in self.OPTION_KEYS})
        except ValidationError as error:
            raise ValueError(
                "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            ) from None
        for key in self.OPTION_KEYS:
            if key != "paths":  # PathSpec, as from_dict made them
                setattr(self, key, getattr(checked, key))

    def arm_count(self) -> int:
        """Arms per round, the matrix's sub-arms included (at most: refused variants are skipped)."""
        names = [arm.name for arm in self.arms]
        return len(self.arms) + matrix.variant_count(self.tls_matrix, names, self.tls_groups)

    def planned_s(self) -> float:
        arms_s = self.rounds * self.arm_count() * (self.warmup_s + self.duration_s)
        return arms_s + saturation_plan.planned_s(self.saturation)

    def stage_count(self) -> int:
        """The saturation search's stages at most, all its arms."""
        sat = self.saturation
        return len(sat["arms"]) * saturation_plan.max_stages(sat) if sat else 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> EngineConfig:
        data = dict(data)
        data["arms"] = [ArmSpec(**arm) for arm in data["arms"]]
        data["paths"] = [PathSpec(**spec) for spec in data.get("paths", [])]
        config = cls(**data)
        config.validate()
        return config


def config_class(options: dict[str, Option]) -> type:
    """The engine config's dataclass for a spec's options (``runspec.options()``): its arms, a field
    per ``engine`` option, the engine's own fields; the options' types and bounds checked by pydantic
    in ``validate``."""
    keys = tuple(name for name, opt in options.items() if opt.engine)
    checked = create_model(
        "EngineOptions",
        __config__=ConfigDict(extra="ignore"),
        **{key: (options[key].engine_type, Field(**options[key].engine_bounds)) for key in keys},
    )
    cls = make_dataclass(
        "EngineConfig",
        [("arms", list[ArmSpec]), *(_option_field(options[key]) for key in keys), *ENGINE_ONLY_FIELDS],
        bases=(_EngineConfig,),
        namespace={"OPTION_KEYS": keys, "_checked": checked, "__doc__": _EngineConfig.__doc__},
    )
    cls.__module__ = __name__
    return cls


EngineConfig = config_class(OPTIONS)


def pin_key(url: str) -> str:
    """``host:port`` of a URL as the engine connects to it: the key of ``EngineConfig.pinned``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# Time for the engine to start (import Locust), preflight each arm and stop each swarm.
STARTUP_ALLOWANCE_S = 30.0
PER_ARM_ALLOWANCE_S = 15.0
# Distributed runs (generators != 1): the workers connecting (generator_connect_s, 30 s by
# default) and, per arm, building it, sending their results and stopping their users, a lost one too.
DISTRIBUTED_ALLOWANCE_S = 60.0
DISTRIBUTED_PER_ARM_ALLOWANCE_S = 30.0
# A saturation stage starts and stops a swarm too, without a preflight.
PER_STAGE_ALLOWANCE_S = 5.0
# Probes run outside the engine: an SSH connection before the load, one-shot benchmarks after it.
PROBE_CONNECT_ALLOWANCE_S = 30.0
PROBE_FINISH_ALLOWANCE_S = 15.0
OPENSSL_SPEED_ALLOWANCE_S = 240.0
CRYPTSETUP_ALLOWANCE_S = 200.0


def engine_limit_s(config: EngineConfig) -> float:
    """How long the engine subprocess may take before its watchdog stops it."""
    arms = config.arm_count() * config.rounds
    stages = config.stage_count()
    limit = (
        config.planned_s() + STARTUP_ALLOWANCE_S + PER_ARM_ALLOWANCE_S * arms + PER_STAGE_ALLOWANCE_S * stages
    )
    if config.generators != 1:
        limit += DISTRIBUTED_ALLOWANCE_S + DISTRIBUTED_PER_ARM_ALLOWANCE_S * (arms + stages)
    return limit


def probe_allowance_s(probes: dict | None) -> float:
    """Time the run's probes may add around the engine (``Run.config["probes"]``)."""
    probes = probes or {}
    if not probes:
        return 0.0
    total = PROBE_CONNECT_ALLOWANCE_S + PROBE_FINISH_ALLOWANCE_S
    if probes.get("openssl_speed"):
        total += OPENSSL_SPEED_ALLOWANCE_S
    if probes.get("openssl_speed_local"):
        total += OPENSSL_SPEED_ALLOWANCE_S
    if probes.get("cryptsetup"):
        total += CRYPTSETUP_ALLOWANCE_S
    return total


def run_limit_s(config: EngineConfig, probes: dict | None = None) -> float:
    """The whole run: the engine plus its probes. The task's time limits and the reaper use it."""
    return engine_limit_s(config) + probe_allowance_s(probes)


def emit(stream: IO[str], message_type: str, **payload: object) -> None:
    stream.write(json.dumps({"type": message_type, **payload}, separators=(",", ":")) + "\n")
    stream.flush()
