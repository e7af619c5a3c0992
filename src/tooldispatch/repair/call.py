"""``repair_call``: resolve the tool name, repair the arguments against its schema, validate."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from tooldispatch.repair.names import by_nearness, match_token, resolve_name
from tooldispatch.repair.types import json_type
from tooldispatch.repair.validate import fast_check, schema_errors
from tooldispatch.repair.walk import Walk, repair_value
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Repair, RepairLevel

_MAX_LISTED_TOOLS: Final = 20


@dataclass(init=False, slots=True)
class RepairResult:
    """The outcome of :func:`repair_call` for one call.

    Attributes:
        ok: the call names a declared tool and its (repaired) arguments satisfy the schema.
        name: the declared tool name the written one resolved to, or ``None``.
        arguments: the repaired arguments (``None`` when they are not an object).
        repairs: every edit made, in order (name first).
        bucket: ``None`` when ok, else ``UnknownName`` or ``SchemaMismatch``.
        error: when not ok, a message a model can act on: the field path, the value passed, what
            the schema expects (with the allowed values of an enum), or the declared tools.
    """

    ok: bool
    name: str | None
    arguments: dict[str, Any] | None
    repairs: tuple[Repair, ...] = ()
    bucket: Literal["UnknownName", "SchemaMismatch"] | None = None
    error: str | None = None

    def __init__(
        self,
        ok: bool,
        name: str | None,
        arguments: dict[str, Any] | None,
        repairs: tuple[Repair, ...] = (),
        bucket: Literal["UnknownName", "SchemaMismatch"] | None = None,
        error: str | None = None,
    ) -> None:
        self.ok = ok
        self.name = name
        self.arguments = arguments
        self.repairs = repairs
        self.bucket = bucket
        self.error = error


def _unknown(name: str | None, tools: Mapping[str, ToolSpec], arguments: Any) -> RepairResult:
    listed = by_nearness(name, tools) if name else list(tools)
    shown = ", ".join(listed[:_MAX_LISTED_TOOLS])
    if len(listed) > _MAX_LISTED_TOOLS:
        shown += f", ... ({len(listed) - _MAX_LISTED_TOOLS} more)"
    declared = f"declared tools: {shown}" if listed else "no tools are declared"
    what = f"unknown tool {json.dumps(name)}" if name else "the call names no tool"
    if name:
        near = match_token(name.strip(), tools, level="bounded")
        if near.value is not None and near.value != name:
            what += f" (did you mean {json.dumps(near.value)}? near matches are not applied to this tool)"
        elif near.ambiguous:
            tied = ", ".join(json.dumps(t) for t in near.ambiguous)
            what += f" (it is equally close to {tied}, so it was not guessed)"
    kept = arguments if isinstance(arguments, dict) else None
    return RepairResult(False, None, kept, (), "UnknownName", f"{what}; {declared}")


def _decode_arguments(arguments: Any, level: RepairLevel) -> tuple[Any, list[Repair]]:
    if arguments is None:
        return {}, []
    repairs: list[Repair] = []
    for _ in range(2):
        if not isinstance(arguments, str) or level == "none":
            break
        try:
            decoded = json.loads(arguments)
        except (ValueError, RecursionError):
            break
        repairs.append(Repair("json_string", "", arguments, decoded))
        arguments = decoded
    return arguments, repairs


def repair_call(name: str | None, arguments: Any, tools: Mapping[str, ToolSpec], *, level: RepairLevel) -> RepairResult:
    """Resolve a call's tool name, repair its arguments against the tool's schema, and validate them.

    Args:
        name: the tool name as the model wrote it (``None`` when it wrote none).
        arguments: the decoded arguments: normally a dict; a JSON string is decoded; ``None`` means
            no arguments were given and reads as ``{}``.
        tools: the declared tools by name (see :func:`tooldispatch.normalize_tools`).
        level: ``none`` (validate only), ``lossless`` (edits that cannot change meaning) or
            ``bounded`` (lossless plus unique nearest matches within Levenshtein distance 2).

    Returns:
        The result; a call that is already valid comes back unchanged with no repairs.

    Raises:
        ConfigError: the tool's parameters schema is not a valid JSON Schema.
    """
    spec = tools.get(name) if name is not None else None
    if spec is not None and type(arguments) is dict:
        check = fast_check(spec.parameters)
        if check is not None and check(arguments):
            return RepairResult(True, spec.name, arguments)
    repairs: list[Repair] = []
    if spec is None:
        if name is None:
            return _unknown(None, tools, arguments)
        resolved, name_repairs = resolve_name(name, tools, level=level)
        if resolved is None:
            return _unknown(name, tools, arguments)
        spec = tools[resolved]
        repairs.extend(name_repairs)
    return _repair_arguments(spec.name, arguments, spec.parameters, level, repairs)


def repair_arguments(name: str, arguments: Any, schema: Mapping[str, Any], *, level: RepairLevel) -> RepairResult:
    """Repair the arguments of a call to a known tool against its schema, and validate them.

    :func:`repair_call` without the name resolution, for a caller that already holds the tool.

    Args:
        name: the declared tool name.
        arguments: the decoded arguments, as for :func:`repair_call`.
        schema: the tool's parameters schema.
        level: as for :func:`repair_call`.

    Raises:
        ConfigError: the schema is not a valid JSON Schema.
    """
    return _repair_arguments(name, arguments, schema, level, [])


def _repair_arguments(
    name: str, arguments: Any, schema: Mapping[str, Any], level: RepairLevel, repairs: list[Repair]
) -> RepairResult:
    arguments, decoded = _decode_arguments(arguments, level)
    repairs.extend(decoded)
    if not isinstance(arguments, dict):
        error = f"{name}: arguments must be a JSON object, got {json_type(arguments)}"
        if isinstance(arguments, str) and level != "none":
            error += " that is not valid JSON"
        return RepairResult(False, name, None, tuple(repairs), "SchemaMismatch", error)
    walk = Walk(level, schema)
    fixed = repair_value(arguments, schema, "", walk)
    if not isinstance(fixed, dict):
        # The schema asks for something other than an object at the top (through anyOf or $ref): arguments are
        # always an object, so no repair can meet it.
        error = f"{name}: the tool's parameters schema does not accept an object, and arguments are always one"
        return RepairResult(False, name, arguments, tuple(repairs), "SchemaMismatch", error)
    repairs.extend(walk.repairs)
    check = fast_check(schema)
    if check is not None and check(fixed):
        return RepairResult(True, name, fixed, tuple(repairs))
    errors = schema_errors(fixed, schema, tool=name)
    if not errors:
        return RepairResult(True, name, fixed, tuple(repairs))
    parts = []
    for path, message in errors:
        hint = walk.hints.get(path)
        parts.append(f"{message} ({hint})" if hint else message)
    for path, hint in walk.hints.items():
        if not any(p == path for p, _ in errors):
            parts.append(f"{path}: {hint}")
    error = f"{name}: invalid arguments: " + "; ".join(parts)
    return RepairResult(False, name, fixed, tuple(repairs), "SchemaMismatch", error)
