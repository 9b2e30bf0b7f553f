"""``RunSpec``'s fields as the surfaces read them (``portal.lib.runs.runspec``): an ``Option`` per field with
its type, bounds, default, texts and the house's extras (``json_schema_extra``), and which kind of
form field, CLI option and API field it makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen
from pydantic import BaseModel


@dataclass(frozen=True)
class Option:
    """One field of ``RunSpec`` as the surfaces read it."""

    name: str
    annotation: Any
    default: Any
    label: str
    help: str
    description: str
    bounds: dict  # ge / le / gt / lt / max_length, as pydantic holds them
    extra: dict

    @property
    def form_name(self) -> str:
        return self.extra.get("form_name", self.name)

    @property
    def cli(self) -> str | None:
        return self.extra.get("cli")

    @property
    def overridable(self) -> bool:
        return bool(self.extra.get("overridable"))

    @property
    def engine(self) -> bool:
        return bool(self.extra.get("engine"))

    @property
    def engine_type(self) -> Any:
        """The type of its ``EngineConfig`` field: the spec's, unless ``engine`` names another."""
        engine = self.extra.get("engine")
        if isinstance(engine, dict) and "type" in engine:
            return {"int": int, "float": float}[engine["type"]]  # a name: the extras are JSON (the schema)
        return self.annotation

    @property
    def engine_bounds(self) -> dict:
        """The bounds the engine checks: the spec's, unless ``engine`` gives its own (wider: the engine
        also serves callers other than the form, such as tests measuring a sub-second window)."""
        engine = self.extra.get("engine")
        if isinstance(engine, dict):
            return {key: value for key, value in engine.items() if key != "type"}
        return self.bounds

    @property
    def custom(self) -> bool:
        return bool(self.extra.get("custom"))

    @property
    def kind(self) -> str:
        """int, float, bool, choices (a list of names), text or lines (parsed by the form), custom."""
        if self.custom:
            return "custom"
        if "form" in self.extra:
            return self.extra["form"]
        if "labels" in self.extra:
            return "choices" if get_origin(self.annotation) is list else "choice"
        base = [
            arg for arg in getattr(self.annotation, "__args__", (self.annotation,)) if arg is not type(None)
        ]
        return {int: "int", float: "float", bool: "bool"}[base[0]]

    @property
    def required(self) -> bool:
        """Whether the form needs a value: numbers and choices unless ``optional`` or nullable."""
        if self.extra.get("optional") or self.kind not in ("int", "float", "choice", "choices"):
            return False
        return type(None) not in getattr(self.annotation, "__args__", ())


_BOUND_TYPES = {Ge: "ge", Le: "le", Gt: "gt", Lt: "lt", MaxLen: "max_length"}


def bounds_of(metadata) -> dict:
    """ge / le / gt / lt / max_length from pydantic's metadata (a field's, or an Annotated item's)."""
    bounds = {}
    for item in metadata:
        for part in getattr(item, "metadata", [item]):
            for kind, key in _BOUND_TYPES.items():
                if isinstance(part, kind):
                    bounds[key] = getattr(part, key)
    return bounds


def item_type(annotation) -> tuple[Any, dict]:
    """A list's item type without its ``Annotated`` wrapper, and that wrapper's bounds."""
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, bounds_of(metadata)
    return annotation, {}


def _option(name: str, info) -> Option:
    bounds = bounds_of(info.metadata)
    extra = dict(info.json_schema_extra or {})
    default = info.get_default(call_default_factory=True)
    form_help = extra.pop("help", "")
    return Option(
        name=name,
        annotation=info.annotation,
        default=default,
        label=extra.pop("label"),
        help=form_help,
        description=info.description or form_help,
        bounds=bounds,
        extra=extra,
    )


def options(spec: type[BaseModel]) -> dict[str, Option]:
    """The fields of ``spec`` (``portal.lib.runs.runspec.RunSpec``, or a copy with more fields), in order."""
    return {name: _option(name, info) for name, info in spec.model_fields.items()}
