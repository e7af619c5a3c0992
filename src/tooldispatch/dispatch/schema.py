"""JSON Schema for a tool's arguments, derived from its signature and Google-style docstring.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``None``, ``list[T]``, ``tuple[T, ...]``,
``dict[str, T]``, ``Literal[...]``, ``enum.Enum`` subclasses, ``T | None`` / ``Optional[T]``, and
``typing.Any`` (no constraint). A parameter without a default is required. Anything else is refused at
registration with a message asking for an explicit ``schema=``.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from tooldispatch.errors import RegistrationError

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?|Attributes):\s*$")
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and the ``Args:`` entries.

    Args:
        doc: the docstring (``None`` gives an empty result).

    Returns:
        The text before the first section, and a mapping of parameter name to description.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent = 0
    for line in lines:
        header = _SECTION.match(line.strip()) if not line.startswith(" ") else None
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (current is None or indent <= base_indent):
            current, base_indent = match.group(1).lstrip("*"), indent
            args[current] = match.group(3).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args


def annotation_schema(annotation: Any, where: str) -> dict[str, Any]:
    """Return the JSON Schema for one type annotation.

    Raises:
        RegistrationError: the annotation has no JSON Schema equivalent here.
    """
    if annotation is Any:
        return {}
    if annotation in _SCALARS:
        return {"type": _SCALARS[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [member.value for member in annotation]}
    origin = typing.get_origin(annotation)
    targs = typing.get_args(annotation)
    if origin is typing.Literal:
        return {"enum": list(targs)}
    if origin in (typing.Union, types.UnionType):
        options = [annotation_schema(a, where) for a in targs]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (list, set, frozenset) or annotation in (list, set, frozenset):
        return {"type": "array", "items": annotation_schema(targs[0], where)} if targs else {"type": "array"}
    if origin is tuple or annotation is tuple:
        if len(targs) == 2 and targs[1] is Ellipsis:
            return {"type": "array", "items": annotation_schema(targs[0], where)}
        if targs:
            items = [annotation_schema(a, where) for a in targs]
            return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
        return {"type": "array"}
    if origin is dict or annotation is dict:
        if targs and targs[0] is not str:
            raise RegistrationError(f"{where}: JSON object keys are strings; annotate as dict[str, ...]")
        return (
            {"type": "object", "additionalProperties": annotation_schema(targs[1], where)}
            if targs
            else {"type": "object"}
        )
    raise RegistrationError(
        f"{where}: cannot derive a JSON Schema from the annotation {annotation!r}; "
        "use str, int, float, bool, list[...], dict[str, ...], Literal[...], an Enum, or pass schema={...}"
    )


def _strip_none(schema: dict[str, Any]) -> dict[str, Any]:
    """``T | None`` on an optional parameter: null means absent, so the schema keeps only ``T``."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            return dict(rest[0])
        if len(rest) < len(options):
            return {"anyOf": rest}
    return schema


def derive_schema(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    """Derive a tool's description and argument schema from its signature and docstring.

    Args:
        fn: the tool function.
        name: the tool name, for error messages.

    Returns:
        The docstring description and an object JSON Schema (``additionalProperties: false``).

    Raises:
        RegistrationError: a parameter is positional-only, variadic, unannotated or of an unsupported type.
    """
    description, arg_docs = parse_docstring(inspect.getdoc(fn))
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise RegistrationError(f"tool {name!r}: cannot resolve its type hints ({exc}); pass schema={{...}}") from exc
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in inspect.signature(fn).parameters.items():
        where = f"tool {name!r}, parameter {pname!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise RegistrationError(f"{where}: only named parameters can be called with JSON arguments; pass schema=")
        if pname not in hints:
            raise RegistrationError(f"{where}: add a type annotation or pass schema={{...}}")
        prop = annotation_schema(hints[pname], where)
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        else:
            prop = _strip_none(prop)
            if param.default is not None and _json_scalar(param.default):
                prop["default"] = param.default
        if pname in arg_docs:
            prop["description"] = arg_docs[pname]
        properties[pname] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return description, schema


def _json_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)
