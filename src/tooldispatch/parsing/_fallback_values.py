"""What the fallback stage asks of a decoded value: is it a placeholder, an echoed schema, python keywords?

Python-call arguments are read with a small reader for the plain shape and with :mod:`ast` otherwise, walking
literal nodes only (never evaluating).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any, Final

from tooldispatch.parsing.formats._common import is_schema_echo, parse_python
from tooldispatch.parsing.formats.pythonic import read_plain
from tooldispatch.parsing.lenient import MAX_DEPTH
from tooldispatch.toolspec import ToolSpec

PLACEHOLDER_TEXT: Final = re.compile(r"\s*(?:\{\s*(?:\.\.\.|…)?\s*\}|\.\.\.|…|<[^<>]{0,40}>|\{\{[^{}]{0,40}\}\})\s*")


def is_schema_echo_object(value: Mapping[str, Any]) -> bool:
    """A tool declaration copied back (``{"type": "function", "function": {... "parameters": schema}}``)."""
    fn = value.get("function")
    if value.get("type") == "function" and isinstance(fn, dict):
        return is_schema_echo(fn.get("parameters"))
    return "description" in value and is_schema_echo(value.get("parameters"))


def looks_like_schema(args: Any, spec: ToolSpec) -> bool:
    """Arguments that are a JSON Schema rather than values (unless the tool takes such keys)."""
    return is_schema_echo(args, takes_properties="properties" in spec.properties)


# One plain word, and none that makes the object something other than the call's arguments.
_STRAY_WORD: Final = re.compile(r"[A-Za-z]{1,24}")
_NOT_STRAY: Final = frozenset({"not", "never", "no", "without", "like", "example", "or", "and", "vs", "returns"})


def may_be_stray(word: str) -> bool:
    """True when ``word``, between a declared name and its object, may be a stray word (``get_weather now {``)."""
    return _STRAY_WORD.fullmatch(word) is not None and word.lower() not in _NOT_STRAY


def is_placeholder_args(args: Any) -> bool:
    """``{...}``-style stand-ins, or an object whose every value is one (``{"city": "..."}``)."""
    if isinstance(args, str):
        return bool(PLACEHOLDER_TEXT.fullmatch(args))
    if isinstance(args, dict) and args:
        return all(isinstance(v, str) and PLACEHOLDER_TEXT.fullmatch(v) for v in args.values())
    return False


def parse_kwargs(inner: str) -> dict[str, Any] | None:
    """Keyword arguments of a python call with literal values, or ``None`` when they are not that."""
    plain = read_plain(f"_f({inner})")  # the common case, without ast; it reads values as the walk below does
    if plain is not None and len(plain) == 1:
        return plain[0].arguments
    return _kwargs_with_ast(inner)


def _kwargs_with_ast(inner: str) -> dict[str, Any] | None:
    """:func:`_parse_kwargs` through ``ast``, for any text."""
    try:
        tree = parse_python(f"_f({inner})", "eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    call = tree.body
    if not isinstance(call, ast.Call) or call.args:
        return None
    out: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            return None
        try:
            out[kw.arg] = _literal(kw.value, 0)
        except ValueError:
            return None
    return out


_NAMED_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None, "none": None}


def _literal(node: ast.expr, depth: int) -> Any:
    """The value of a literal expression, walking the tree (never evaluating)."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool | type(None)):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                raise ValueError("a dict key that is not a string")
            out[k.value] = _literal(v, depth + 1)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, int | float)
            and not isinstance(operand.value, bool)
        ):
            return -operand.value if isinstance(node.op, ast.USub) else operand.value
    if isinstance(node, ast.Name) and node.id in _NAMED_LITERALS:
        return _NAMED_LITERALS[node.id]
    raise ValueError(f"not a literal: {type(node).__name__}")
