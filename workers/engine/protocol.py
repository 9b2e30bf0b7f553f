"""The engine's contract: the config it reads on stdin and the JSON lines it writes on stdout.

Imported by both sides (the Celery task / CLI and the engine subprocess), so it must not import
Django or Locust. Documented in docs/engine-protocol.md.

stdout messages, one JSON object per line, each with a "type":
  hello     {"engine": {versions, host facts}}
  progress  {"arm", "arm_index", "arms_total", "phase": "warmup"|"measure", "elapsed_s", "rps", "users"}
  arm       {"arm", "url", "result": {...}}           one per finished (or cut-short) arm
  arm_error {"arm", "error"}                            the arm could not run; the engine stops
  done      {"status": "succeeded"|"cancelled"}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import IO

ARMS = ("plain", "tls", "plain_new", "tls_new", "tls_resumed")
ARM_SCHEMES = {
    "plain": "http",
    "plain_new": "http",
    "tls": "https",
    "tls_new": "https",
    "tls_resumed": "https",
}
EXIT_OK = 0
EXIT_ARM_ERROR = 3
EXIT_BAD_CONFIG = 2


@dataclass
class ArmSpec:
    name: str
    url: str


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

    def planned_s(self) -> float:
        return len(self.arms) * (self.warmup_s + self.duration_s)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> EngineConfig:
        data = dict(data)
        data["arms"] = [ArmSpec(**arm) for arm in data["arms"]]
        config = cls(**data)
        config.validate()
        return config


def emit(stream: IO[str], message_type: str, **payload: object) -> None:
    stream.write(json.dumps({"type": message_type, **payload}, separators=(",", ":")) + "\n")
    stream.flush()
