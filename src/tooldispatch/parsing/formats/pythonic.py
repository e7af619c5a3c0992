"""Pythonic tool calls: ``[get_weather(city="Paris"), get_time()]`` (Llama 3.2/4, BFCL-style output).

The source is parsed with ``ast`` and argument values are read by walking literal nodes; nothing is
ever evaluated. JSON spellings (``true``, ``false``, ``null``) are read as the values they mean.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Final

from tooldispatch.parsing._markers import PY_LIST
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import balanced_end, make_call, match_name, parse_python, skip_ws

FORMAT: Final = "pythonic"
MARKERS: Final[tuple[str, ...]] = (PY_LIST,)

# Linear: anchored at a line start, no nested quantifiers.
_LIST_START: Final = re.compile(r"^[ \t]*\[[ \t]*[A-Za-z_][\w.]{0,127}[ \t]*\(", re.MULTILINE)
_NAMESPACES: Final = frozenset({"functions", "default_api", "tools", "api"})
_JSON_NAMES: Final = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


@dataclass(init=False, slots=True)
class PyCall:
    """One call read from Python source.

    Attributes:
        name: the called name (dotted names kept, a known namespace such as ``functions.`` removed).
        arguments: keyword arguments, or ``None`` when they could not be read.
        error: why the arguments could not be read.
    """

    name: str | None
    arguments: dict[str, Any] | None
    error: str | None = None

    def __init__(self, name: str | None, arguments: dict[str, Any] | None, error: str | None = None) -> None:
        self.name = name
        self.arguments = arguments
        self.error = error


class _NotLiteral(ValueError):
    pass


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        if base is None:
            return None
        return node.attr if base in _NAMESPACES else f"{base}.{node.attr}"
    return None


def literal(node: ast.expr) -> Any:
    """Return the value of a literal expression node (containers, numbers, strings, JSON names).

    Raises:
        ValueError: the node is not a literal.
    """
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (str, int, float, bool)) or node.value is None:
            return node.value
        raise _NotLiteral(f"unsupported constant {node.value!r:.40}")
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise _NotLiteral("dict unpacking is not a literal")
            key = literal(k)
            out[key if isinstance(key, str) else str(key)] = literal(v)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    raise _NotLiteral(f"not a literal value: {ast.dump(node)[:60]}")


def _call(node: ast.expr) -> PyCall:
    if not isinstance(node, ast.Call):
        return PyCall(None, None, "expected a function call")
    if isinstance(node.func, ast.Name) and node.func.id == "print" and len(node.args) == 1 and not node.keywords:
        return _call(node.args[0])
    name = _dotted(node.func)
    if name is None:
        return PyCall(None, None, "the called object is not a plain name")
    if node.args:
        return PyCall(name, None, "positional arguments are not allowed; pass every argument as name=value")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            return PyCall(name, None, "**kwargs is not allowed; pass every argument as name=value")
        try:
            args[kw.arg] = literal(kw.value)
        except ValueError as exc:
            return PyCall(name, None, f"argument {kw.arg!r}: {exc}")
    return PyCall(name, args)


def parse_python_calls(source: str) -> list[PyCall] | None:
    """Read calls from Python source: a list of calls, one call, or one call per line.

    Returns:
        The calls, or ``None`` when the source is not Python made only of calls.
    """
    try:
        tree = parse_python(source.strip(), "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls: list[PyCall] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        value = stmt.value
        items = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        if not items or not all(isinstance(i, ast.Call) for i in items):
            return None
        try:
            calls.extend(_call(i) for i in items)
        except RecursionError:
            return None
    return calls or None


def split_top_level(source: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split ``source[start:end]`` at commas that are not inside brackets or strings."""
    parts: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        paren = source.find("(", pos, end)
        if paren < 0:
            break
        close = balanced_end(source, paren, python=True, limit=end)
        if close < 0:
            parts.append((pos, end))
            return parts
        parts.append((pos, close))
        comma = source.find(",", close, end)
        if comma < 0:
            break
        pos = comma + 1
    return parts


def find(text: str) -> list[RawCall]:
    """Find ``[f(a=1), g()]`` lists that start a line."""
    out: list[RawCall] = []
    pos = 0
    while True:
        m = _LIST_START.search(text, pos)
        if m is None:
            return out
        bracket = text.index("[", m.start())
        end = balanced_end(text, bracket, python=True)
        out.extend(calls_in_list(text, bracket, end, FORMAT))
        if end < 0:
            return out
        pos = end


def calls_in_list(text: str, bracket: int, end: int, fmt: str) -> list[RawCall]:
    """Read the calls of the list starting at ``bracket`` (``end < 0``: it was never closed)."""
    if end < 0:
        name = match_name(text, skip_ws(text, bracket + 1))
        return [
            make_call(text, (bracket, len(text)), fmt, name, decode_error="the call list is not closed", truncated=True)
        ]
    calls = parse_python_calls(text[bracket:end])
    if calls is not None:
        return [_raw(text, (bracket, end), fmt, c) for c in calls]
    # One bad element must not drop the good ones: read each element on its own.
    out: list[RawCall] = []
    parts = split_top_level(text, bracket + 1, end - 1)
    for i, (s, e) in enumerate(parts):
        span = (bracket if i == 0 else s, end if i == len(parts) - 1 else e)
        one = parse_python_calls(text[s:e])
        if one is not None and len(one) == 1:
            out.append(_raw(text, span, fmt, one[0]))
        else:
            name = match_name(text, skip_ws(text, s, e))
            out.append(make_call(text, span, fmt, name, arguments_text=text[s:e], decode_error="not a valid call"))
    return out


def _raw(text: str, span: tuple[int, int], fmt: str, call: PyCall) -> RawCall:
    return make_call(text, span, fmt, call.name, arguments=call.arguments, decode_error=call.error)
