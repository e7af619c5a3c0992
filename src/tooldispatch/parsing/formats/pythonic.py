"""Pythonic tool calls: ``[get_weather(city="Paris"), get_time()]`` (Llama 3.2/4, BFCL-style output).

The source is parsed with ``ast`` and argument values are read by walking literal nodes; nothing is
ever evaluated. JSON spellings (``true``, ``false``, ``null``) are read as the values they mean.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from keyword import iskeyword
from typing import Any, Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import balanced_end, make_call, match_name, parse_python, skip_ws
from tooldispatch.parsing.formats._format import PY_LIST, CallGrammar, CallList, Format, PromptFormat
from tooldispatch.parsing.formats._prompt import py_call, tool_lines, tool_response
from tooldispatch.toolspec import ToolSpec

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
    stripped = source.strip()
    quick = read_plain(stripped)
    return quick if quick is not None else _parse_with_ast(stripped)


def _parse_with_ast(source: str) -> list[PyCall] | None:
    """:func:`parse_python_calls` through ``ast``, for any source."""
    try:
        tree = parse_python(source, "exec")
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


# -- the plain shape, read without ``ast`` ---------------------------------------------------------------------
# ``[f(a="x", b=1), g()]`` or one call, with string, number, JSON-name, list and dict values: what models write.
# Anything else (escapes, comments, positional arguments, tuples, other names, several statements, text
# outside ASCII) is left to ``ast``; where the reader answers, the answer is the one ``ast`` gives (a test
# compares them).
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPACE_CHARS: Final = frozenset(" \t\r\n")
_BLANK_CHARS: Final = frozenset(" \t")
_LINE_BREAKS: Final = frozenset("\r\n")
_PLAIN_STRING: Final = {'"': re.compile(r'"([^"\\\r\n]*)"'), "'": re.compile(r"'([^'\\\r\n]*)'")}
_NUMBER: Final = re.compile(r"(?:0|[1-9][0-9]{0,99})(?:\.[0-9]{1,100})?(?:[eE][+-]?[0-9]{1,4})?(?![A-Za-z0-9_.])")
_QUOTES: Final = frozenset("\"'")


class _NotPlain(Exception):
    """The source leaves the plain shape: ``ast`` reads it."""


def read_plain(source: str) -> list[PyCall] | None:
    """The calls of a plain call list or single call, or ``None`` to leave the source to ``ast``."""
    if not source or not source.isascii() or "\x00" in source:
        return None
    reader = _PlainReader(source)
    try:
        return reader.read()
    except _NotPlain:
        return None


_PLAIN_DEPTH: Final = 32  # deeper values go to ast, whose parser has its own limit


class _PlainReader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def read(self) -> list[PyCall]:
        text = self.text
        calls: list[PyCall] = []
        if text[0] == "[":
            self.pos = 1
            self.space()
            while True:
                calls.append(self.call())
                if self.separator("]"):
                    break
            if self.pos != len(text):
                raise _NotPlain
            return calls
        # One call, or one per line: each line starts with its call (an indented one is an error in Python).
        while True:
            calls.append(self.call())
            while self.pos < len(text) and text[self.pos] in _BLANK_CHARS:
                self.pos += 1
            if self.pos == len(text):
                return calls
            if text[self.pos] not in _LINE_BREAKS:
                raise _NotPlain
            self.space()
            if text[self.pos - 1] not in _LINE_BREAKS:
                raise _NotPlain

    def space(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _SPACE_CHARS:
            pos += 1
        self.pos = pos

    def separator(self, closer: str) -> bool:
        """After an item: a comma (and maybe the closer) or the closer; True when the container closed."""
        self.space()
        if self.at(closer):
            self.pos += 1
            return True
        if not self.at(","):
            raise _NotPlain
        self.pos += 1
        self.space()
        if self.at(closer):
            self.pos += 1
            return True
        return False

    def at(self, char: str) -> bool:
        return self.pos < len(self.text) and self.text[self.pos] == char

    def ident(self) -> str:
        m = _IDENT.match(self.text, self.pos)
        if m is None or iskeyword(m.group()):
            raise _NotPlain
        self.pos = m.end()
        return m.group()

    def call(self) -> PyCall:
        name = self.ident()
        while self.at("."):
            self.pos += 1
            part = self.ident()
            name = part if name in _NAMESPACES else f"{name}.{part}"
        if name == "print":
            raise _NotPlain
        # Spaces may come before the parenthesis, not a line break (outside brackets it ends the statement).
        while self.pos < len(self.text) and self.text[self.pos] in _BLANK_CHARS:
            self.pos += 1
        if not self.at("("):
            raise _NotPlain
        self.pos += 1
        self.space()
        args: dict[str, Any] = {}
        if self.at(")"):
            self.pos += 1
            return PyCall(name, args)
        while True:
            key = self.ident()
            self.space()
            if not self.at("=") or self.text.startswith("==", self.pos) or key in args:
                raise _NotPlain
            self.pos += 1
            self.space()
            args[key] = self.value()
            if self.separator(")"):
                return PyCall(name, args)

    def value(self) -> Any:
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise _NotPlain
        c = text[pos]
        if c in _QUOTES:
            m = _PLAIN_STRING[c].match(text, pos)
            if m is None:
                raise _NotPlain
            self.pos = m.end()
            self.space()
            if self.pos < len(text) and text[self.pos] in _QUOTES:  # "a" "b" is one concatenated string
                raise _NotPlain
            return m.group(1)
        if c == "-" or "0" <= c <= "9":
            sign = 1
            if c == "-":
                sign = -1
                pos += 1
            m = _NUMBER.match(text, pos)
            if m is None:
                raise _NotPlain
            self.pos = m.end()
            spelled = m.group()
            number: int | float = int(spelled) if spelled.isdigit() else float(spelled)
            return -number if sign < 0 else number
        if c == "[" or c == "{":
            self.depth += 1
            if self.depth > _PLAIN_DEPTH:
                raise _NotPlain
            value = self.container(c)
            self.depth -= 1
            return value
        m = _IDENT.match(text, pos)
        if m is not None and m.group() in _JSON_NAMES:
            self.pos = m.end()
            return _JSON_NAMES[m.group()]
        raise _NotPlain

    def container(self, c: str) -> Any:
        """A list or dict value whose opening bracket ``c`` is at ``pos``."""
        pos = self.pos
        if c == "[":
            self.pos = pos + 1
            self.space()
            items: list[Any] = []
            if self.at("]"):
                self.pos += 1
                return items
            while True:
                items.append(self.value())
                if self.separator("]"):
                    return items
        self.pos = pos + 1
        self.space()
        out: dict[str, Any] = {}
        if self.at("}"):
            self.pos += 1
            return out
        while True:
            key = self.value()
            if type(key) is not str:
                raise _NotPlain
            self.space()
            if not self.at(":"):
                raise _NotPlain
            self.pos += 1
            self.space()
            out[key] = self.value()
            if self.separator("}"):
                return out


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


def _system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below, described as JSON schemas. To call functions, respond with "
        "only a Python list of calls with keyword arguments, for example\n"
        '[function_name(argument_name="value"), other_function()]\n'
        "When no call is needed, answer in plain text.\n\n"
        f"{tool_lines(tools)}"
    )


def _calls(calls: CallList) -> str:
    return "[" + ", ".join(py_call(n, a) for n, a in calls) + "]"


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    other_names=("llama4_pythonic",),
    prompts=(
        PromptFormat(
            "pythonic",
            _system,
            _calls,
            tool_response,
            CallGrammar("python", "[", "]", many=True, start="\\["),
        ),
    ),
)
"""Pythonic: a list of Python calls (held by the stream parser as a balanced list)."""
