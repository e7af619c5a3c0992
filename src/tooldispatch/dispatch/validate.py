"""Argument validation with messages a model can act on: field path, value passed, what is expected.

Permissive on optionals (a missing or ``null`` optional argument is absent), strict on requireds
(``null`` for a required argument is an error, never a default). Arguments that fail are passed through
schema-guided repair (``tooldispatch.repair``) at the tool's repair level: ``lossless`` by default for
side-effecting tools, ``bounded`` for read-only ones; each edit is recorded.

The schema is compiled once, in ``repair.validate`` (the cache the parser uses too). A call the parser
accepted comes with its stamp (``ToolCall.checked``): while the arguments are what was stamped against this
tool's schema, they are not validated again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.dispatch.text import SURROGATE, escaped
from tooldispatch.repair import repair_arguments
from tooldispatch.repair.validate import compiled, still_valid
from tooldispatch.types import Checked

_JSON_TYPES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


@dataclass(frozen=True, slots=True)
class Validation:
    """The arguments after normalization, and what is still wrong with them.

    Attributes:
        args: the arguments to call the tool with (null optionals removed).
        errors: one message per problem, sorted by path; empty when valid.
        repairs: what was normalized or repaired (``Repair`` values or dicts of the same shape).
    """

    args: dict[str, Any]
    errors: tuple[str, ...] = ()
    repairs: tuple[Any, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when the arguments satisfy the schema."""
        return not self.errors

    @property
    def message(self) -> str:
        """All problems in one sentence-per-problem string."""
        return "; ".join(self.errors)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _expected(schema: Any) -> str:
    if not isinstance(schema, Mapping):
        return "a value"
    if "enum" in schema:
        return "one of " + ", ".join(_show(v) for v in schema["enum"])
    if "const" in schema:
        return f"exactly {_show(schema['const'])}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " or ".join(_expected(o) for o in options)
    return "a value matching the schema"


def _path(error: jsonschema.ValidationError) -> str:
    return "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else "arguments"


def _describe(error: jsonschema.ValidationError) -> str:
    path = _path(error)
    kind = error.validator
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    instance: Any = error.instance
    if kind == "required":
        wanted: Any = error.validator_value
        missing = [name for name in wanted if name not in instance]
        parts = []
        for name in missing:
            prop = (schema.get("properties") or {}).get(name, {})
            parts.append(
                f"missing required argument {('/' + name) if path == 'arguments' else path + '/' + name}"
                f" (expected {_expected(prop)})"
            )
        return "; ".join(parts)
    if kind == "additionalProperties":
        allowed = sorted((schema.get("properties") or {}).keys())
        extra = sorted(k for k in instance if k not in allowed)
        return (
            f"unexpected argument(s) {', '.join(extra)} at {path}; "
            f"expected only: {', '.join(allowed) if allowed else 'no arguments'}"
        )
    if kind == "type":
        return (
            f"{path}: passed {_show(error.instance)} ({_json_type(error.instance)}), expected {_expected(error.schema)}"
        )
    if kind == "enum":
        return f"{path}: passed {_show(error.instance)}, expected {_expected(error.schema)}"
    return f"{path}: passed {_show(error.instance)}; {error.message}"


MAX_DEPTH = 64
"""How deeply call arguments may nest (objects and arrays); deeper ones are rejected before any walk."""


def unreadable(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first thing that makes ``value`` unusable as arguments, as ``(kind, path)``, else ``None``.

    ``kind`` is ``"deep"`` for objects or arrays nested more than :data:`MAX_DEPTH` levels (every later
    step walks them recursively) or ``"surrogate"`` for a string (key or value) holding an unpaired UTF-16
    surrogate: JSON allows ``"\\ud800"`` alone and ``json.loads`` keeps it as a code point that is not
    text, which cannot be encoded, stored or hashed. The walk itself uses no recursion.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            if SURROGATE.search(item):
                return "surrogate", where
            continue
        if isinstance(item, Mapping):
            children: list[tuple[Any, str, int]] = []
            for key, child in item.items():
                inner = f"{where}/{key}"
                if isinstance(key, str) and SURROGATE.search(key):
                    return "surrogate", inner
                children.append((child, inner, depth + 1))
        elif isinstance(item, list | tuple):
            children = [(child, f"{where}/{i}", depth + 1) for i, child in enumerate(item)]
        else:
            continue
        if children and depth + 1 > MAX_DEPTH:
            return "deep", where
        stack.extend(reversed(children))
    return None


def escape_surrogates(value: Any) -> Any:
    """A copy of ``value`` whose unpaired surrogates are written as ``\\udXXX`` text (for the record)."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, Mapping):
        return {escape_surrogates(k): escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_surrogates(item) for item in value]
    return value


def validate_args(tool: ToolDef, args: Any, *, checked: Checked | None = None) -> Validation:
    """Normalize and validate a call's arguments against the tool's schema.

    Args:
        tool: the registered tool.
        args: the arguments as the model gave them (normally a dict).
        checked: the parser's stamp of the call (``ToolCall.checked``); arguments it still vouches for
            against this tool's schema are taken as they are.

    Returns:
        A ``Validation``; ``errors`` is empty when the call may run.
    """
    if (
        checked is not None
        and type(args) is dict
        and None not in args.values()
        and still_valid(checked, tool.schema, args)
    ):
        return Validation(args=dict(args))
    schema = compiled(tool.schema)
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return Validation(
            args={}, errors=(f"arguments: passed {_show(args)} ({_json_type(args)}), expected an object",)
        )
    required = tool.required
    cleaned: dict[str, Any] = {}
    repairs: list[Any] = []
    for key, value in args.items():
        if value is None and key not in required:
            repairs.append({"kind": "null_optional", "path": f"/{key}", "before": None, "after": "(absent)"})
            continue
        cleaned[str(key)] = value
    if schema.accepts(cleaned, tool=tool.name):
        return Validation(args=cleaned, repairs=tuple(repairs))
    if tool.repair != "none":
        repaired = repair_arguments(tool.name, cleaned, tool.schema, level=tool.repair)
        if repaired.ok and repaired.arguments is not None:
            return Validation(args=dict(repaired.arguments), repairs=(*repairs, *repaired.repairs))
    found = schema.validator(tool=tool.name).iter_errors(cleaned)
    errors = sorted(found, key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    messages: list[str] = []
    for error in errors:
        text = _describe(error)
        if text not in messages:
            messages.append(text)
    return Validation(args=cleaned, errors=tuple(messages), repairs=tuple(repairs))
