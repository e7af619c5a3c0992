"""Lossless type coercion, and the small schema reading the repair walk needs.

Only directions that cannot change meaning are taken: ``"5"`` → 5 for an integer, ``"5.5"`` → 5.5 for
a number, ``5.0`` → 5 for an integer, ``"true"``/``"false"`` → booleans, a stringified object or array
→ parsed when the schema wants one, a single value → ``[value]`` when the schema wants an array of such
values, and a tuple (from Python-call syntax) → a list. A number is never turned into a string, nor a
string into a number it does not spell.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final, TypeGuard

JSON_TYPES: Final[dict[type, str]] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    dict: "object",
    list: "array",
    type(None): "null",
}

_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_REF_HOPS: Final = 32


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered at once for a ``dict`` (the ABC check costs many times more)."""
    return type(value) is dict or isinstance(value, Mapping)


def json_type(value: Any) -> str:
    """Return the JSON type name of a decoded value (``"other"`` for anything JSON cannot hold)."""
    return JSON_TYPES.get(type(value), "other")


def type_matches(value: Any, wanted: str) -> bool:
    """Return True when ``value`` is of JSON type ``wanted`` (an integer is also a number)."""
    actual = json_type(value)
    if actual == wanted:
        return True
    if wanted == "number":
        return actual == "integer"
    return wanted == "integer" and actual == "number" and math.isfinite(value) and float(value).is_integer()


def declared_types(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the schema's ``type`` as a tuple (empty when it does not constrain the type)."""
    wanted = schema.get("type")
    if isinstance(wanted, str):
        return (wanted,)
    if isinstance(wanted, list):
        return tuple(t for t in wanted if isinstance(t, str))
    return ()


def resolve_ref(schema: Any, root: Mapping[str, Any]) -> Any:
    """Follow local ``$ref`` pointers (``#/$defs/Name``); return the schema unchanged when there is none.

    A reference that does not resolve locally is left as it is (validation reports it).
    """
    for _ in range(_MAX_REF_HOPS):
        if not is_mapping(schema):
            return schema
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if not is_mapping(target) or part not in target:
                return schema
            target = target[part]
        schema = target
    return schema


def allows_null(schema: Any, root: Mapping[str, Any]) -> bool:
    """Return True when ``null`` may be a valid value for ``schema`` (conservatively)."""
    schema = resolve_ref(schema, root)
    if not is_mapping(schema):
        return schema is not False
    types = declared_types(schema)
    if types and "null" not in types:
        return False
    if "enum" in schema and None not in (schema.get("enum") or ()):
        return False
    if "const" in schema and schema.get("const") is not None:
        return False
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and not any(allows_null(b, root) for b in branches):
            return False
    return True


def _from_string(text: str, wanted: str) -> tuple[bool, Any]:
    stripped = text.strip()
    if wanted in ("integer", "number") and _JSON_NUMBER.fullmatch(stripped):
        number = float(stripped)
        if not math.isfinite(number):
            return False, None
        if "." not in stripped and "e" not in stripped.lower():
            return True, int(stripped)
        if wanted == "integer":
            return (True, int(number)) if number.is_integer() and abs(number) < 2**53 else (False, None)
        return True, number
    if wanted == "boolean" and stripped.lower() in ("true", "false"):
        return True, stripped.lower() == "true"
    if wanted in ("object", "array") and stripped[:1] in ("{", "["):
        try:
            decoded = json.loads(stripped)
        except (ValueError, RecursionError):
            return False, None
        return (True, decoded) if json_type(decoded) == wanted else (False, None)
    return False, None


def coerce(value: Any, wanted: str) -> tuple[str, Any] | None:
    """Coerce ``value`` to JSON type ``wanted`` when that cannot change its meaning.

    Returns:
        ``(kind, new_value)`` where kind is ``type`` or ``json_string`` (a stringified object or array
        was decoded), or ``None`` when no lossless coercion exists.
    """
    if isinstance(value, str):
        ok, new = _from_string(value, wanted)
        if not ok:
            return None
        return ("json_string" if wanted in ("object", "array") else "type"), new
    if wanted == "integer" and type(value) is float and math.isfinite(value) and value.is_integer():
        return "type", int(value)
    if wanted == "array" and isinstance(value, tuple):
        return "type", list(value)
    return None
