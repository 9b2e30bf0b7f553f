"""The engine's contract: the config it reads on stdin and the JSON lines it writes on stdout.

Imported by both sides (the Celery task / CLI and the engine subprocess), so it must not import
Django or Locust. Documented in docs/engine-protocol.md.

stdout messages, one JSON object per line, each with a "type":
  hello     {"engine": {versions, host facts}}
  progress  {"arm", "arm_index", "arms_total", "phase": "warmup"|"measure", "elapsed_s", "rps", "users",
             "second": {"t_s", "requests", "p50_us", "p95_us"} | null}   second: the measured second just
                                                                          closed (null in the warm-up)
  tls_info  {"arm", "info": {...}}                     TLS facts from one handshake (first TLS arm)
  matrix    {"arm", "variants": [{"name", "variant", "status", "detail", "negotiated"}]}
                                                        TLS matrix: each variant probed (tls_matrix)
  arm       {"arm", "round", "url", "result": {...}}  one per finished (or cut-short) arm and round;
                                                        result["stopped"]: why the engine stopped it
                                                        early (target unreachable), else null
  capacity  {"arm", "stage", "point": {...}}            saturation search: one per stage run
                                                        (portal.lib.capacity.stage_point)
  refused   {"arm", "url", "reason"}                  an arm the server's protocols cannot serve (no h2
                                                        over ALPN, no HTTP/2 with prior knowledge): not
                                                        measured, the other arms are
  arm_error {"arm", "error", "preflight"?, "url"?}      an arm's preflight failed (every arm is
                                                        preflighted before the first is measured;
                                                        "preflight": true), or an arm was stopped
                                                        (after its "arm"): the engine stops, exit code 3
  generator {"event": "joined"|"lost", "id", "host", "at_s", ...}  distributed runs (generators != 1):
                                                        a Locust worker process joined or was lost
  done      {"status": "succeeded"|"cancelled"}
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from typing import IO
from urllib.parse import urlsplit

from portal.lib import clientcerts, matrix
from portal.lib import saturation as saturation_plan
from portal.lib.runspec import (  # noqa: F401
    ARM_NAMES,
    MAX_GENERATORS,
    MAX_H2_STREAMS,
    TLS_LIBRARIES,
    parse_generators,
)

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


@dataclass
class EngineConfig:
    arms: list[ArmSpec]
    users: int = 4
    spawn_rate: float = 4.0
    warmup_s: float = 2.0
    duration_s: float = 10.0
    verify_tls: bool = True
    timeout_s: float = 10.0
    expected_status: list[int] = field(default_factory=list)  # empty: any 2xx
    # Weighted request targets (path + query), the same for every arm; empty: each arm's URL path.
    paths: list[PathSpec] = field(default_factory=list)
    # Sent on every request, so credentials go out pre-emptively (no 401 round trip): on the https
    # arms only, unless headers_over_http says the user allowed them over plain HTTP too.
    headers: dict[str, str] = field(default_factory=dict)
    headers_over_http: bool = False
    think_time_s: float = 0.0
    # Open loop: total requests/s spread over the users, latency measured from the intended start
    # (no coordinated omission). None: closed loop.
    arrival_rate: float | None = None
    rounds: int = 1
    follow_redirects: bool = True
    # The address to connect to per "host:port" (``pin_key``), checked by the outbound address policy
    # (portal/lib/netpolicy.py) at run start: the engine never resolves these hosts again, so DNS
    # rebinding cannot move the target mid-run. None: resolve (only tools that run the engine directly).
    pinned: dict[str, str] | None = None
    # The TLS library of every arm and sub-arm (workers/engine/tlslib.py): "system" (Python's ssl) or
    # "bundled" (pyOpenSSL on the cryptography wheel's OpenSSL).
    tls_library: str = "system"
    # TLS configuration matrix (portal/lib/matrix.py): the dimensions to vary ("protocol", "group",
    # "cert", "resumption"); tls_new is repeated under each client-side variant as a sub-arm.
    tls_matrix: list[str] = field(default_factory=list)
    # Key-exchange groups the user named for the matrix's group dimension, besides x25519, p256 and
    # X25519MLKEM768 (OpenSSL's names, matrix.parse_groups).
    tls_groups: list[str] = field(default_factory=list)
    # Locust worker processes per generator host (workers.engine.distributed); 1: the single-process
    # local runner; 0 ("auto"): one per core of each generator host, resolved by the engine there.
    generators: int = 1
    # Client certificates (portal/lib/clientcerts.py), {"rsa"|"ecdsa": {"cert": PEM, "key": PEM}}: on the
    # engine's stdin only (the stored run config holds them sealed). The tls_mtls arm presents one
    # (clientcerts.arm_key_type), the matrix's client_cert variants each theirs; other arms none.
    client_certs: dict[str, dict] = field(default_factory=dict)
    # Saturation search (portal/lib/saturation.py): after the run's arms, each of ``arms`` again in
    # stages of rising load until its knee. None: no search.
    saturation: dict | None = None
    # The h2 and h2c arms: requests in flight per user on its one connection (HTTP/2 streams), at most
    # the server's SETTINGS_MAX_CONCURRENT_STREAMS (workers.engine.http2).
    h2_streams: int = 1
    # A resumption (workers/attempts.py): "arm#round" pairs an earlier attempt already measured; the
    # engine runs everything else, in the same order.
    skip: list[str] = field(default_factory=list)

    def validate(self) -> None:
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
        if self.users < 1 or self.spawn_rate <= 0 or self.warmup_s < 0 or self.duration_s <= 0:
            raise ValueError("users, spawn_rate and duration_s must be positive, warmup_s not negative")
        if not 1 <= self.h2_streams <= MAX_H2_STREAMS:
            raise ValueError(f"h2_streams must be 1..{MAX_H2_STREAMS}")
        if self.rounds < 1 or self.think_time_s < 0:
            raise ValueError("rounds must be at least 1 and think_time_s not negative")
        if self.arrival_rate is not None and self.arrival_rate <= 0:
            raise ValueError("arrival_rate must be positive")
        for spec in self.paths:
            if not spec.path.startswith("/") or spec.weight <= 0:
                raise ValueError(f"a path must start with / and have a positive weight: {spec}")
        if self.tls_library not in TLS_LIBRARIES:
            raise ValueError(f"tls_library must be {' or '.join(TLS_LIBRARIES)}, got {self.tls_library!r}")
        if self.tls_matrix:
            matrix.parse_dimensions(self.tls_matrix)
            if not any(arm.name == matrix.MATRIX_ARM for arm in self.arms):
                raise ValueError(f"tls_matrix needs the {matrix.MATRIX_ARM} arm")
        self.tls_groups = matrix.parse_groups(self.tls_groups)
        for kind, pair in self.client_certs.items():
            if (
                kind not in clientcerts.KEY_TYPES
                or not isinstance(pair, dict)
                or set(pair) != {"cert", "key"}
            ):
                raise ValueError(
                    f"client_certs: {{{'|'.join(clientcerts.KEY_TYPES)}: {{cert, key}}}} expected"
                )
        if not 0 <= self.generators <= MAX_GENERATORS:
            raise ValueError(f"generators must be 1..{MAX_GENERATORS} or 0 (auto: one per core)")
        if self.generators != 1 and self.tls_matrix:
            raise ValueError("the TLS matrix runs with one generator process (generators 1)")
        self.saturation = saturation_plan.normalise(self.saturation, [arm.name for arm in self.arms])
        if self.pinned is not None:
            for arm in self.arms:
                address = self.pinned.get(pin_key(arm.url), "")
                try:
                    ipaddress.ip_address(address)
                except ValueError:
                    raise ValueError(f"no pinned address for {pin_key(arm.url)} (arm {arm.name!r})") from None

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


def pin_key(url: str) -> str:
    """``host:port`` of a URL as the engine connects to it: the key of ``EngineConfig.pinned``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# Time for the engine to start (import Locust), preflight each arm and stop each swarm.
STARTUP_ALLOWANCE_S = 30.0
PER_ARM_ALLOWANCE_S = 15.0
# Distributed runs (generators != 1): the workers connecting (TOLLGATE_GENERATOR_CONNECT_S, 30 s by
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
