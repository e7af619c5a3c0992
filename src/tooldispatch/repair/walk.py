"""The repair walk: one pass over the arguments, guided by the tool's schema.

It renames keys, coerces types losslessly, drops ``null`` optionals and repairs enum values, recursing
into nested objects and arrays (paths like ``/items/0/unit``). It never decides validity; it leaves
that to validation, and records hints (ties, near matches the level forbade) by path for its message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tooldispatch.repair.enums import fix_enum, in_enum
from tooldispatch.repair.keys import plan_keys
from tooldispatch.repair.types import (
    allows_null,
    coerce,
    declared_types,
    is_mapping,
    json_type,
    resolve_ref,
    type_matches,
)
from tooldispatch.types import Repair, RepairLevel

_MAX_DEPTH: Final = 64


@dataclass(init=False, slots=True)
class Walk:
    """State of one repair walk.

    Attributes:
        level: the repair level allowed.
        root: the root schema (for ``$ref``).
        repairs: edits made, in order.
        hints: JSON pointer → sentences for the error message.
    """

    level: RepairLevel
    root: Mapping[str, Any]
    repairs: list[Repair] = field(default_factory=list)
    hints: dict[str, str] = field(default_factory=dict)

    def __init__(
        self,
        level: RepairLevel,
        root: Mapping[str, Any],
        repairs: list[Repair] | None = None,
        hints: dict[str, str] | None = None,
    ) -> None:
        self.level = level
        self.root = root
        self.repairs = [] if repairs is None else repairs
        self.hints = {} if hints is None else hints


def _pointer_part(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _branch_for(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> tuple[Any, bool]:
    """Pick the one ``anyOf``/``oneOf`` branch that fits ``value``'s type; return (schema, handled)."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if not isinstance(branches, list):
            continue
        resolved = [resolve_ref(b, root) for b in branches]
        typed = [b for b in resolved if is_mapping(b) and declared_types(b) != ("null",)]
        if value is None:
            return schema, True
        if len(typed) == 1:
            return typed[0], False
        fitting = [b for b in typed if any(type_matches(value, t) for t in declared_types(b))]
        if len(fitting) == 1:
            return fitting[0], False
        return schema, True
    return schema, False


def repair_value(value: Any, schema: Any, path: str, walk: Walk, depth: int = 0) -> Any:
    """Return ``value`` repaired against ``schema``, recording every edit in ``walk``."""
    if depth > _MAX_DEPTH:
        return value
    schema = resolve_ref(schema, walk.root)
    if not is_mapping(schema):
        return value
    schema, done = _branch_for(value, schema, walk.root)
    if done or value is None:
        return value
    types = declared_types(schema)
    if types and not any(type_matches(value, t) for t in types):
        value = _coerce(value, schema, types, path, walk, depth)
    elif "integer" in types and type(value) is float and "number" not in types:
        value = _coerce(value, schema, ("integer",), path, walk, depth)
    allowed = schema.get("enum")
    if isinstance(allowed, list) and not in_enum(value, allowed):
        fix = fix_enum(value, allowed, level=walk.level)
        if fix.found:
            walk.repairs.append(Repair("enum", path, value, fix.value, fix.distance))
            value = fix.value
        elif fix.hint:
            walk.hints[path] = fix.hint
    if isinstance(value, dict):
        return _repair_object(value, schema, path, walk, depth)
    if isinstance(value, list):
        items = schema.get("items")
        if items is not None and items is not True:
            return [repair_value(item, items, f"{path}/{i}", walk, depth + 1) for i, item in enumerate(value)]
    return value


def _coerce(value: Any, schema: Mapping[str, Any], types: tuple[str, ...], path: str, walk: Walk, depth: int) -> Any:
    if walk.level == "none":
        return value
    for wanted in types:
        done = coerce(value, wanted)
        if done is not None:
            kind, new = done
            walk.repairs.append(Repair(kind, path, value, new))
            return new
    if "array" in types and json_type(value) not in ("array", "other"):
        items = resolve_ref(schema.get("items", {}), walk.root)
        item_types = declared_types(items) if is_mapping(items) else ()
        fits = not item_types or any(type_matches(value, t) for t in item_types)
        if not fits:
            fits = any(coerce(value, t) is not None for t in item_types)
        if fits:
            walk.repairs.append(Repair("type", path, value, [value]))
            return [value]
    return value


def _repair_object(value: dict[str, Any], schema: Mapping[str, Any], path: str, walk: Walk, depth: int) -> Any:
    props = schema.get("properties")
    props = props if is_mapping(props) else {}
    plan = plan_keys(value, schema, level=walk.level)
    for key, hint in plan.hints.items():
        walk.hints[f"{path}/{_pointer_part(key)}"] = hint
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for key, item in value.items():
        target, distance = plan.renames.get(key, (key, 0))
        if target != key:
            walk.repairs.append(Repair("key", f"{path}/{_pointer_part(key)}", key, target, distance))
        child_path = f"{path}/{_pointer_part(target)}"
        if target in props:
            sub = props[target]
            if item is None and walk.level != "none" and target not in required and not allows_null(sub, walk.root):
                walk.repairs.append(Repair("null_optional", child_path, None, None))
                continue
            out[target] = repair_value(item, sub, child_path, walk, depth + 1)
        elif is_mapping(extra):
            out[target] = repair_value(item, extra, child_path, walk, depth + 1)
        else:
            out[target] = item
    return out
