"""Values written as text between XML-like tags, typed by the tool's schema.

The XML-parameter formats (qwen3-coder ``<parameter=…>``, GLM ``<arg_value>``, XML invoke, DeepSeek V3.2 DSML,
Seed-OSS: those whose declaration says ``text_values``) write every value as text; their serving stacks type each
one by the tool's schema. So does this module, once per call, after the finder and before repair:

- a parameter declared ``string`` keeps its exact text (JSON-looking text included);
- one declared ``object`` or ``array`` is decoded as JSON; failing that, as JSON whose quotes were escaped
  once more (``{\\"k\\": \\"v\\"}``, tolerance ``escaped_quotes``), or as a Python literal (``{'k': 'v'}``,
  ``['a', 'b']``, ``True``/``None``: the lenient decoder's ``single_quotes``, ``python_literals`` and
  ``trailing_comma`` and nothing more). The lenient decoder is iterative and linear in the text, and nothing
  is ever evaluated;
- one the schema does not type (an undeclared key, no ``type``) is decoded when it is a JSON object or array,
  and left as text otherwise;
- numbers and booleans stay text for the lossless coercion of ``repair/`` to convert.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import DECLARED
from tooldispatch.parsing.formats.glm import FIX_GLUED_NAME, split_glued
from tooldispatch.parsing.lenient import LenientJSONError, loads_lenient, loads_strict
from tooldispatch.repair import resolve_name
from tooldispatch.repair.types import declared_types, is_mapping, json_type, resolve_ref
from tooldispatch.toolspec import ToolSpec

XML_VALUE_FORMATS: Final[frozenset[str]] = frozenset(f.name for f in DECLARED if f.text_values)
"""The formats whose values are text typed by the schema (``Format.text_values``)."""
FIX_ESCAPED_QUOTES: Final = "escaped_quotes"
"""The tolerance of a JSON value whose quotes were escaped as if inside a string (``{\\"k\\": 1}``)."""
_LITERAL_FIXES: Final = frozenset({"single_quotes", "python_literals", "trailing_comma"})
VALUE_FIXES: Final = _LITERAL_FIXES | {FIX_ESCAPED_QUOTES}
"""The tolerances of typing one value; the markup of a call that needed only these was complete."""
_CONTAINERS: Final = ("object", "array")


def typed_call(raw: RawCall, specs: Mapping[str, ToolSpec]) -> RawCall:
    """``raw`` with its text values typed by the schema of the tool it names (itself when nothing changes)."""
    args = raw.arguments
    if type(args) is not dict or not args:
        return raw
    if FIX_GLUED_NAME in raw.lenient and raw.name is not None:
        split = split_glued(raw.name, args, list(specs))
        if split is not None:
            raw = RawCall(
                raw.span, raw.raw, raw.format, raw.stage, split[0], split[1], raw.arguments_text, raw.decode_error,
                raw.truncated, raw.lenient, raw.flags, raw.unearned,
            )  # fmt: skip
            args = split[1]
    spec = specs.get(raw.name) if raw.name is not None else None
    if spec is None and raw.name:
        resolved, _ = resolve_name(raw.name, specs, level="bounded")
        spec = specs.get(resolved) if resolved is not None else None
    props = spec.properties if spec is not None else {}
    root = spec.parameters if spec is not None else {}
    typed: dict[str, Any] = {}
    fixes: list[str] = []
    changed = False
    for key, value in args.items():
        if type(value) is str:
            new, used = typed_value(value, _types_of(props.get(key), root))
            if new is not value:
                changed = True
                fixes.extend(f for f in used if f not in fixes and f not in raw.lenient)
            typed[key] = new
        else:
            typed[key] = value
    if not changed:
        return raw
    return RawCall(
        raw.span, raw.raw, raw.format, raw.stage, raw.name, typed, raw.arguments_text, raw.decode_error, raw.truncated,
        (*raw.lenient, *fixes), raw.flags, raw.unearned,
    )  # fmt: skip


def _types_of(schema: Any, root: Mapping[str, Any]) -> tuple[str, ...]:
    """The JSON types a property's schema allows (empty when it does not say)."""
    schema = resolve_ref(schema, root)
    if not is_mapping(schema):
        return ()
    types = declared_types(schema)
    if types:
        return types
    out: list[str] = []
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                branch = resolve_ref(branch, root)
                if is_mapping(branch):
                    out.extend(t for t in declared_types(branch) if t not in out)
    return tuple(out)


def typed_value(text: str, types: tuple[str, ...]) -> tuple[Any, tuple[str, ...]]:
    """The value of one parameter written as ``text`` whose schema allows ``types``, and the tolerances used.

    Returns ``text`` itself (the same object) when it stays text.
    """
    if "string" in types:
        return text, ()
    wanted = [t for t in _CONTAINERS if t in types]
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return text, ()
    if not wanted:
        if types:
            return text, ()
        try:
            value = loads_strict(stripped)
        except (ValueError, RecursionError):
            return text, ()
        return (value, ()) if json_type(value) in _CONTAINERS else (text, ())
    decoded = decode_container(stripped)
    if decoded is None or json_type(decoded[0]) not in wanted:
        return text, ()
    return decoded


def decode_container(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """A JSON object or array written as JSON, JSON with escaped quotes, or a Python literal; else ``None``."""
    try:
        return loads_strict(text), ()
    except (ValueError, RecursionError):
        pass
    if '\\"' in text:
        try:
            unescaped = loads_strict(f'"{text}"')
            return loads_strict(unescaped), (FIX_ESCAPED_QUOTES,)
        except (ValueError, RecursionError):
            pass
    try:
        read = loads_lenient(text, strict_failed=True)
    except (LenientJSONError, RecursionError):
        return None
    if not read.complete or not _LITERAL_FIXES.issuperset(read.fixes):
        return None
    return read.value, read.fixes
