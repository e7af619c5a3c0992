"""Pieces shared by the strict-format finders: JSON decoding, bracket scanning, building ``RawCall``.

Every scan here is linear in the text it looks at: plain ``str.find`` loops and regular expressions
whose alternatives start with disjoint characters (no nested quantifiers that could backtrack).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, overload

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.lenient import (
    NOT_JSON,
    LenientJSONError,
    loads_lenient,
    scan_json,
    skip_json_space,
    strict_value,
)

FIX_UNCLOSED: Final = "unclosed_tag"
"""Fix recorded when a block's closing marker is missing (the block ran into the next one or the end)."""
FIX_INCOMPLETE: Final = "missing_closer"
"""Fix recorded when the arguments themselves were cut off (the lenient decoder's name for it)."""
FIX_ARGUMENTS_STRING: Final = "arguments_as_string"
"""Fix recorded when the arguments were a JSON string holding the object."""
FIX_FLATTENED: Final = "flattened_arguments"
"""Fix recorded when the arguments sat next to ``name`` instead of under ``arguments``."""
FIX_FENCE: Final = "fence"
"""Fix recorded when a Markdown code fence wrapped a payload that should be bare."""

# Linear: each alternative starts with a different character, string bodies cannot overlap.
_DQ_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]()]', re.DOTALL)
_PY_TOKENS: Final = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|\'[^\'\\\n]*(?:\\.[^\'\\\n]*)*\'?|[{}\[\]()]', re.DOTALL)
_WS: Final = re.compile(r"\s*")
_NAME: Final = re.compile(r"[A-Za-z_][\w.\-:]{0,127}")
_FENCE: Final = re.compile(r"\A```[A-Za-z_]*[ \t]*\n?(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)

PLACEHOLDER_NAMES: Final = frozenset(
    {
        "tool_name",
        "function_name",
        "function-name",
        "func_name",
        "name",
        "your_tool_name",
        "example_tool",
    }
)
_PLACEHOLDER_MAX: Final = 400
_PLACEHOLDER_MARKS: Final = ("<function-name>", "<args-json-object>", "{...}", "<tool-name>", "<function_name>")
# Linear: an alternation of literals.
_PLACEHOLDER_MARK: Final = re.compile("|".join(re.escape(mark) for mark in _PLACEHOLDER_MARKS))


@dataclass(init=False, slots=True)
class Decoded:
    """One decoded JSON payload.

    Attributes:
        value: the decoded value, ``None`` when ``error`` is set.
        fixes: lenient fixes that were needed (empty for plain JSON).
        error: why nothing could be decoded.
        complete: ``False`` when closers had to be added at the end (the payload was cut off).
    """

    value: Any = None
    fixes: tuple[str, ...] = ()
    error: str | None = None
    complete: bool = True

    def __init__(
        self, value: Any = None, fixes: tuple[str, ...] = (), error: str | None = None, complete: bool = True
    ) -> None:
        self.value = value
        self.fixes = fixes
        self.error = error
        self.complete = complete


def decode_json(text: str, *, strict_failed: bool = False) -> Decoded:
    """Decode JSON with ``json.loads`` first and lenient decoding second; never raises.

    Args:
        text: the JSON text.
        strict_failed: the caller already saw ``json.loads(text)`` fail, so it is not tried again.
    """
    if not strict_failed:
        value = strict_value(text)
        if value is not NOT_JSON:
            return Decoded(value)
    try:
        result = loads_lenient(text, strict_failed=True)
    except (LenientJSONError, ValueError, RecursionError) as exc:
        return Decoded(error=str(exc) or "not valid JSON")
    fixes = tuple(result.fixes) or ("lenient",)
    if not result.complete and FIX_INCOMPLETE not in fixes:
        fixes = (*fixes, FIX_INCOMPLETE)
    return Decoded(result.value, fixes=fixes, complete=result.complete)


def raw_decode_at(text: str, pos: int, limit: int | None = None) -> tuple[Any, int] | None:
    """Decode one strict JSON object or array starting at ``pos``; return it and its end, or ``None``.

    The value's extent is found first with the bracket scanner and only that slice is decoded:
    ``json``'s own error path counts lines from the start of the text, which would make many
    failed attempts over one long text quadratic.
    """
    if len(text) <= SCAN_FIRST_MAX and text[pos : pos + 1] in ("{", "["):
        # A short text: the scanner finds a valid value's end itself (the bracket scan finds the same one).
        try:
            value, end = scan_json(text, pos)
        except (ValueError, StopIteration, RecursionError):
            return None
        return (value, end) if limit is None or end <= limit else None
    end = balanced_end(text, pos, limit=limit)
    if end < 0:
        return None
    value = strict_value(text[pos:end])
    return None if value is NOT_JSON else (value, end)


SCAN_FIRST_MAX: Final = 4096
"""Texts up to this long are scanned from a bracket directly: a failed scan counts the lines before it, so on
longer texts the bracket scan bounds the slice first."""


def balanced_end(text: str, start: int, *, python: bool = False, limit: int | None = None) -> int:
    """Return the offset just past the bracket that closes the one at ``start``, or ``-1``.

    Quoted strings are skipped (double quotes; single quotes too when ``python``). Bracket kinds are
    not matched against each other: only the depth counts, which is what cut-off output needs.
    """
    tokens = _PY_TOKENS if python else _DQ_TOKENS
    depth = 0
    end = len(text) if limit is None else limit
    for m in tokens.finditer(text, start, end):
        ch = m.group()
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth <= 0:
                return m.end()
    return -1


_DEPTH_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(")?|[{}\[\]]', re.DOTALL)


def unclosed_brackets(text: str) -> str | None:
    """The brackets JSON text leaves open at its end, outermost first; ``None`` when it ends inside a string."""
    stack: list[str] = []
    for m in _DEPTH_TOKENS.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            if m.group(1) is None:
                return None
        elif tok in "{[":
            stack.append(tok)
        elif stack:
            stack.pop()
    return "".join(stack)


def cut_in_opener(text: str, pos: int, end: int, opener: str) -> bool:
    """True when the text ends at ``end`` inside an ``opener`` tag begun after ``pos`` (``<arg_k``, ``<parameter``).

    What follows the last complete parameter is then a parameter cut off before its name or value arrived.
    """
    if end != len(text):
        return False
    tail = text[pos:end].strip()
    return bool(tail) and (opener.startswith(tail) or tail.startswith(opener))


def skip_ws(text: str, pos: int, end: int | None = None) -> int:
    """Return the first offset at or after ``pos`` that is not whitespace."""
    m = _WS.match(text, pos, len(text) if end is None else end)
    return m.end() if m else pos


def match_name(text: str, pos: int) -> str | None:
    """Return the tool-name-like identifier starting at ``pos``, if any."""
    m = _NAME.match(text, pos)
    return m.group() if m else None


def strip_fence(body: str) -> tuple[str, bool]:
    """Remove one Markdown code fence around ``body``; report whether there was one."""
    if not body.startswith("```", skip_ws(body, 0)):
        return body, False
    m = _FENCE.match(body.strip())
    return (m.group(1), True) if m else (body, False)


def is_placeholder(name: str | None, body: str = "") -> bool:
    """True for names and bodies copied from a prompt's format description, which are never calls.

    Only short bodies are looked at: a format example is a line or two, a real call may be long.
    """
    if name is not None:
        written = name.strip()
        if written.lower() in PLACEHOLDER_NAMES or written.startswith(("<", "{")):
            return True
    # Every mark holds "<" or "{...": two plain scans settle most bodies before the pattern's search.
    return (
        len(body) <= _PLACEHOLDER_MAX and ("<" in body or "{..." in body) and _PLACEHOLDER_MARK.search(body) is not None
    )


_SCHEMA_KEYS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "description", "title", "$schema", "$defs"}
)
_PROPERTY_KEYWORDS: Final = frozenset(
    {"type", "description", "enum", "items", "properties", "anyOf", "oneOf", "$ref", "default"}
)


def is_schema_echo(value: Any, *, takes_properties: bool = False) -> bool:
    """True when arguments are really a JSON Schema: the model echoed a tool declaration from its prompt.

    The one answer to "is this an echoed schema?" for the strict stage, the fallback and the strict lane. An
    object schema (``properties`` an object, and ``type: object``, a ``required`` list, or every property
    described with schema keywords) with no key a schema would not have is an echo, unless the tool itself
    takes a ``properties`` argument (``takes_properties``).
    """
    if type(value) is not dict or takes_properties:
        return False
    props = value.get("properties")
    if type(props) is not dict or not value.keys() <= _SCHEMA_KEYS:
        return False
    if value.get("type") == "object" or isinstance(value.get("required"), list):
        return True
    return bool(props) and all(type(p) is dict and not _PROPERTY_KEYWORDS.isdisjoint(p) for p in props.values())


def split_call_object(obj: Any) -> tuple[str | None, Any, tuple[str, ...], str | None]:
    """Read ``name`` and arguments out of a decoded call object.

    Accepts ``{"name", "arguments"|"parameters"}``, the OpenAI shape ``{"function": {...}}``, arguments
    given as a JSON string, and arguments written next to ``name``.

    Returns:
        ``(name, arguments, fixes, error)``.
    """
    if not isinstance(obj, dict):
        return None, None, (), "expected a JSON object with a name and arguments"
    fn = obj.get("function")
    if isinstance(fn, dict):
        obj = fn
    name_value = obj.get("name")
    name = name_value if isinstance(name_value, str) else None
    if name is None and isinstance(fn, str):
        name = fn
    fixes: tuple[str, ...] = ()
    for key in ("arguments", "parameters", "args"):
        if key in obj:
            args = obj[key]
            break
    else:
        rest = {k: v for k, v in obj.items() if k not in ("name", "function", "type", "id")}
        args = rest
        if rest:
            fixes = (FIX_FLATTENED,)
    if args is None:
        args = {}
    if isinstance(args, str):
        if not args.strip():
            return name, {}, (FIX_ARGUMENTS_STRING,), None
        inner = decode_json(args)
        if inner.error is not None:
            return name, None, fixes, f"arguments string is not JSON: {inner.error}"
        return name, inner.value, (*fixes, FIX_ARGUMENTS_STRING, *inner.fixes), None
    return name, args, fixes, None


def looks_like_call(obj: Any) -> bool:
    """True for ``{"name": str, "arguments"|"parameters": ...}`` and the OpenAI ``{"function": {...}}`` shape."""
    if not isinstance(obj, dict):
        return False
    fn = obj.get("function")
    if isinstance(fn, dict):
        obj = fn
    return isinstance(obj.get("name"), str) and ("arguments" in obj or "parameters" in obj)


def make_call(
    text: str,
    span: tuple[int, int],
    fmt: str,
    name: str | None,
    *,
    arguments: Any = None,
    arguments_text: str | None = None,
    decode_error: str | None = None,
    fixes: tuple[str, ...] = (),
    truncated: bool = False,
) -> RawCall:
    """Build a ``RawCall``: stage ``strict`` when nothing needed fixing, ``fallback`` otherwise."""
    unique = fixes if len(fixes) < 2 else tuple(dict.fromkeys(fixes))
    return RawCall(
        span=span,
        raw=text[span[0] : span[1]],
        format=fmt,
        stage="fallback" if unique else "strict",
        name=name.strip() if isinstance(name, str) else None,
        arguments=None if decode_error is not None else arguments,
        arguments_text=arguments_text,
        decode_error=decode_error,
        truncated=truncated,
        lenient=unique,
    )


def call_from_named_body(
    text: str,
    span: tuple[int, int],
    fmt: str,
    name: str | None,
    body: str,
    *,
    fixes: tuple[str, ...] = (),
    truncated: bool = False,
) -> RawCall:
    """A call whose name stands outside its JSON arguments body (DeepSeek, harmony); never raises.

    An empty body means no arguments; an undecodable one keeps its text and the decode error.
    """
    if not body.strip():
        return make_call(text, span, fmt, name, arguments={}, fixes=fixes, truncated=truncated)
    decoded = decode_json(body)
    if decoded.error is not None:
        return make_call(
            text, span, fmt, name, arguments_text=body, decode_error=decoded.error, fixes=fixes, truncated=truncated
        )
    return make_call(
        text,
        span,
        fmt,
        name,
        arguments=decoded.value,
        arguments_text=body,
        fixes=(*fixes, *decoded.fixes),
        truncated=truncated,
    )


def call_from_json_text(
    text: str,
    span: tuple[int, int],
    fmt: str,
    payload: str,
    *,
    fixes: tuple[str, ...] = (),
    truncated: bool = False,
    strict_failed: bool = False,
) -> RawCall:
    """Decode a ``{"name": ..., "arguments": ...}`` payload into a ``RawCall`` (never raises).

    ``strict_failed``: the caller already saw ``json.loads(payload)`` fail (see :func:`decode_json`). A call
    object whose opening was written twice (``{"name": "f", "parameters": {{"name": "f", "parameters": {…}}``)
    is read from its second opening, with the ``duplicated_opener`` tolerance.
    """
    again = _DUPLICATED_OPENER.match(payload) if strict_failed or payload.count("{{", 0, 400) else None
    if again is not None:
        payload, fixes, strict_failed = payload[again.end() :], (*fixes, FIX_DUPLICATED_OPENER), False
    decoded = decode_json(payload, strict_failed=strict_failed)
    if decoded.error is not None:
        return make_call(
            text,
            span,
            fmt,
            guess_name(payload),
            arguments_text=payload,
            decode_error=decoded.error,
            fixes=fixes,
            truncated=truncated,
        )
    name, args, more, error = split_call_object(decoded.value)
    return make_call(
        text,
        span,
        fmt,
        name,
        arguments=args,
        arguments_text=payload,
        decode_error=error,
        fixes=(*fixes, *decoded.fixes, *more),
        truncated=truncated,
    )


FIX_DUPLICATED_OPENER: Final = "duplicated_opener"
# ``{"name": "f", "parameters": {`` right before ``{"name": "f"``: the model began the call twice. Anchored, bounded.
_DUPLICATED_OPENER: Final = re.compile(
    r'\s{0,8}\{\s{0,8}"name"\s{0,8}:\s{0,8}"([^"\\\n]{1,128})"\s{0,8},\s{0,8}"(?:parameters|arguments)"\s{0,8}:'
    r'\s{0,8}\{\s{0,8}(?=\{\s{0,8}"name"\s{0,8}:\s{0,8}"\1")'
)
_NAME_FIELD: Final = re.compile(r'["\']name["\']\s*:\s*["\']([^"\'\n]{1,128})["\']')


def guess_name(payload: str) -> str | None:
    """Read a ``"name": "..."`` field out of JSON too broken to decode, for the error message."""
    m = _NAME_FIELD.search(payload, 0, min(len(payload), 4096))
    return m.group(1) if m else None


@dataclass(init=False, slots=True)
class Block:
    """One ``open … close`` block.

    Attributes:
        start: offset of the opening marker.
        body_start: offset just past the opening marker.
        body_end: offset of the closing marker (or where the block was cut).
        end: offset just past the closing marker (equal to ``body_end`` when unclosed).
        closed: whether the closing marker was there.
        at_end: whether an unclosed block ran to the end of the text.
    """

    start: int
    body_start: int
    body_end: int
    end: int
    closed: bool
    at_end: bool

    def __init__(self, start: int, body_start: int, body_end: int, end: int, closed: bool, at_end: bool) -> None:
        self.start = start
        self.body_start = body_start
        self.body_end = body_end
        self.end = end
        self.closed = closed
        self.at_end = at_end


class NextFinder:
    """Find the next occurrence of one fixed string, remembering the last answer.

    Callers move forward through the text; an answer is reused while the query position has not
    passed it, so a scan that asks again and again (many openers, one far closer) stays linear.
    """

    __slots__ = ("_at", "_from", "needle", "text")

    def __init__(self, text: str, needle: str) -> None:
        self.text = text
        self.needle = needle
        self._from = -1
        self._at = -1

    def find(self, pos: int, end: int | None = None) -> int:
        """Return the first offset ``>= pos`` (and ``< end``) where the needle starts, or ``-1``."""
        if not (self._from >= 0 and self._from <= pos and (self._at < 0 or self._at >= pos)):
            self._from = pos
            self._at = self.text.find(self.needle, pos)
        if self._at < 0 or (end is not None and self._at + len(self.needle) > end):
            return -1
        return self._at


def iter_blocks(text: str, open_tag: str, close_tag: str) -> Iterator[Block]:
    """Yield every ``open_tag … close_tag`` block, in order, in linear time.

    A block whose closer is missing ends where the next opener starts (``closed=False``) or at the end
    of the text (``at_end=True``). An opener inside a JSON string of the body (the body up to the closer
    is strict JSON) does not end the block, nor does a closer inside one (the body up to it is not JSON,
    and one strict JSON value from the body's start runs to a later closer).
    """
    pos = 0
    n = len(text)
    closes = NextFinder(text, close_tag)
    tried = -1  # the closer whose preceding body was already tried as JSON: each is tried once (linear)
    while True:
        o = text.find(open_tag, pos)
        if o < 0:
            return
        body = o + len(open_tag)
        c = closes.find(body)
        if c >= 0 and not ends_with_bracket(text, body, c):
            c = max(c, _closer_after_json(text, body, close_tag))
        nxt = text.find(open_tag, body)
        nested = 0 <= nxt < c
        if nested and c != tried:
            tried = c
            nested = not _strict_json(text[body:c])
        if c >= 0 and (nxt < 0 or c < nxt or not nested):
            yield Block(o, body, c, c + len(close_tag), closed=True, at_end=False)
            pos = c + len(close_tag)
        elif nxt >= 0:
            yield Block(o, body, nxt, nxt, closed=False, at_end=False)
            pos = nxt
        else:
            yield Block(o, body, n, n, closed=False, at_end=True)
            return


def _closer_after_json(text: str, body: int, close_tag: str) -> int:
    """Where ``close_tag`` starts right after one strict JSON object or array at ``body`` (blanks between), or -1."""
    start = skip_json_space(text, body)
    if text[start : start + 1] not in ("{", "["):
        return -1
    try:
        _, end = scan_json(text, start)
    except (ValueError, StopIteration, RecursionError):
        return -1
    end = skip_json_space(text, end)
    return end if text.startswith(close_tag, end) else -1


def ends_with_bracket(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]``, trailing blanks aside, ends with ``}`` or ``]`` (as a JSON body does)."""
    k = end
    while k > start and text[k - 1] in " \t\r\n":
        k -= 1
    return k > start and text[k - 1] in "}]"


def _strict_json(body: str) -> bool:
    """Whether ``body`` is one strict JSON object or array."""
    if not body.lstrip().startswith(("{", "[")):
        return False
    return strict_value(body) is not NOT_JSON


def extend_to_wrapper(text: str, start: int, end: int, open_tag: str, close_tag: str) -> tuple[int, int]:
    """Grow a span over an ``open_tag`` right before it and a ``close_tag`` right after it."""
    b = start
    floor = max(0, start - 256)
    while b > floor and text[b - 1].isspace():
        b -= 1
    if b >= len(open_tag) and text.startswith(open_tag, b - len(open_tag)):
        start = b - len(open_tag)
    after = skip_ws(text, end)
    if text.startswith(close_tag, after):
        end = after + len(close_tag)
    return start, end


def calls_from_payload(
    text: str,
    span: tuple[int, int],
    fmt: str,
    payload: str,
    *,
    fixes: tuple[str, ...] = (),
    truncated: bool = False,
    strict_failed: bool = False,
) -> list[RawCall]:
    """Like ``call_from_json_text``, but a JSON list of call objects gives one ``RawCall`` each."""
    if payload.startswith("[", skip_ws(payload, 0)):
        decoded = decode_json(payload, strict_failed=strict_failed)
        if decoded.error is None and isinstance(decoded.value, list) and decoded.value:
            out = []
            for item in decoded.value:
                name, args, more, error = split_call_object(item)
                out.append(
                    make_call(
                        text,
                        span,
                        fmt,
                        name,
                        arguments=args,
                        arguments_text=payload,
                        decode_error=error,
                        fixes=(*fixes, *decoded.fixes, *more),
                        truncated=truncated,
                    )
                )
            return out
    return [
        call_from_json_text(text, span, fmt, payload, fixes=fixes, truncated=truncated, strict_failed=strict_failed)
    ]


TOOL_CALL_OPEN: Final = "<tool_call>"
TOOL_CALL_CLOSE: Final = "</tool_call>"
_IDENT_ONLY: Final = re.compile(r"\s*[A-Za-z_][\w.\-]{0,127}\s*\Z")


def tool_call_body_kind(text: str, start: int, end: int) -> str:
    """Say which format owns a ``<tool_call>`` body: ``hermes``, ``glm``, ``qwen3_coder``, ``xml_invoke``.

    ``none`` for a body none of them would write (prose that mentions the tag, Python inside it); the
    fallback stage may still read those.
    """
    first = skip_ws(text, start, end)
    if text.startswith("<function=", first):
        return "qwen3_coder"
    if text.startswith("<invoke", first):
        return "xml_invoke"
    # GLM writes the name and then the first pair; a name is short, so only the head is searched.
    # ``arg_key>``: the first pair's opener, or its closer when the opener is missing.
    if text.find("arg_key>", start, min(end, first + 200)) >= 0 or _IDENT_ONLY.match(text, start, end):
        return "glm"
    if text.startswith(("{", "[", "```"), first):
        return "hermes"
    return "none"


def xml_value(raw: str) -> str:
    """Read a value written between XML-like tags: its text, typed later by the tool's schema.

    One leading and one trailing newline are dropped (the templates put the value on its own line); everything
    else is kept as written, a further trailing newline included (``parsing._typed_values`` types the text).
    """
    value = raw[1:] if raw.startswith("\n") else raw
    return value[:-1] if value.endswith("\n") else value


@overload
def parse_python(source: str, mode: Literal["exec"]) -> ast.Module: ...


@overload
def parse_python(source: str, mode: Literal["eval"]) -> ast.Expression: ...


def parse_python(source: str, mode: Literal["exec", "eval"]) -> ast.Module | ast.Expression:
    """``ast.parse`` of model text, without the compiler's warnings (an invalid escape such as ``"\\<"``).

    The caller's warning filters would otherwise print them or, set to ``error``, turn them into a
    ``SyntaxError`` that rejects a call Python reads fine.

    Raises:
        SyntaxError, ValueError, RecursionError, MemoryError: as ``ast.parse``.
    """
    if _MAY_WARN.search(source) is None:  # the filters cost more than the parse of a short call
        return ast.parse(source, mode="exec") if mode == "exec" else ast.parse(source, mode="eval")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if mode == "exec":
            return ast.parse(source, mode="exec")
        return ast.parse(source, mode="eval")


# What the parser warns about: escapes in strings, and a number run into a name (``0x1for``, ``1if``).
_MAY_WARN: Final = re.compile(r"\\|\d[A-Za-z_]")
