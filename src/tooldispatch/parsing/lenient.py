"""Lenient JSON: decode the almost-JSON that small and quantized models write.

``json.loads`` is tried first, so well-formed input costs what it always costs. When it fails, one
hand-written pass reads the text again with these tolerances, each recorded by a stable name:

=====================  ==============================================================
fix                    what was tolerated
=====================  ==============================================================
``single_quotes``      ``'...'`` strings
``python_literals``    ``True``, ``False``, ``None``
``trailing_comma``     ``[1, 2,]`` and ``{"a": 1,}``
``missing_comma``      ``{"a": 1 "b": 2}``
``unquoted_keys``      ``{city: "Paris"}``
``raw_newline``        raw newlines, tabs and other control characters inside strings
``bad_escape``         escapes JSON does not define (``\\'``, ``\\x``), kept as written
``loose_number``       ``+1``, ``.5``, ``1.``, ``007``
``stray_escape``       a literal ``\\n``, ``\\t`` or ``\\r`` outside strings (read as whitespace)
``mismatched_closer``  ``{"a": [1, 2}``: the inner containers are closed first
``missing_closer``     the text ends inside a string, array or object (also sets ``complete=False``)
``duplicated_object``  the same value written twice back to back (the first is kept)
``trailing_text``      text after the first complete value (ignored)
=====================  ==============================================================

One more tolerance is about the text around the value, not the value: ``doubled_braces``, a call object
written inside one extra pair of braces (``{{"name": ..., "arguments": {...}}}``, as in a prompt template
whose braces were never unescaped), read by :func:`doubled_braces` only when that is the whole text.

``NaN`` and ``Infinity`` are rejected: they are not JSON, and no tool schema wants them.

The parser is iterative with an explicit stack, so deep nesting cannot exhaust Python's recursion
limit, and it reads each character a bounded number of times, so time is linear in the input.
Values nested deeper than :data:`MAX_DEPTH` are refused, because the layers after the parser
(repair, ``jsonschema``) walk values recursively.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "FIX_DOUBLED_BRACES",
    "MAX_DEPTH",
    "NOT_JSON",
    "LenientJSONError",
    "LenientResult",
    "doubled_braces",
    "loads_lenient",
    "loads_strict",
    "scan_json",
    "skip_json_space",
    "strict_value",
]

FIX_DOUBLED_BRACES: Final = "doubled_braces"
"""The tolerance of a whole text that is one object inside one extra pair of braces."""

MAX_DEPTH: Final = 100
"""The deepest nesting of arrays and objects accepted (tool arguments rarely pass 10)."""


class LenientJSONError(ValueError):
    """The text is not JSON even by the lenient rules.

    Attributes:
        pos: the offset where reading stopped.
    """

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} at offset {pos}")
        self.pos = pos


@dataclass(init=False, slots=True)
class LenientResult:
    """A decoded value and what had to be tolerated to get it.

    Attributes:
        value: the decoded value.
        fixes: the names of the tolerances used, in the order first needed, each once.
        complete: ``False`` when the text ended before the value did (missing closers were added).
    """

    value: Any
    fixes: tuple[str, ...] = ()
    complete: bool = True

    def __init__(self, value: Any, fixes: tuple[str, ...] = (), complete: bool = True) -> None:
        self.value = value
        self.fixes = fixes
        self.complete = complete


_WS: Final = re.compile(r"[ \t\r\n\ufeff\u00a0]*")
# The body of a double- or single-quoted string, escapes included, up to (not including) its closing quote.
DQ_BODY: Final = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
SQ_BODY: Final = re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL)
_ESCAPE: Final = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_CONTROL: Final = re.compile(r"[\x00-\x1f]")
_NUMBER: Final = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d*)?")
_STRICT_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_IDENT: Final = re.compile(r"[A-Za-z_$][\w$\-]*")
_NON_FINITE: Final = frozenset({"NaN", "nan", "Infinity", "infinity", "inf", "Inf"})
_JSON_LITERALS: Final[dict[str, Any]] = {"true": True, "false": False, "null": None}
_PY_LITERALS: Final[dict[str, Any]] = {"True": True, "False": False, "None": None}
_LITERAL_PREFIXES: Final = frozenset(w[:k] for w in (*_JSON_LITERALS, *_PY_LITERALS) for k in range(1, len(w)))
_SIMPLE_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "'": "'",
}
_NUMBER_START: Final = frozenset("-+.0123456789")
_CLOSER_OF: Final = {"{": "}", "[": "]"}
# The tokens of the reader below. Between tokens: JSON whitespace, a BOM and no-break spaces. A number is a
# strict JSON number not run into a word (anything looser is read by ``_number``); a literal is true, false or
# null not run into a word; any other character is a token of its own.
_TOKEN_SPACE: Final = frozenset(" \t\r\n\ufeff\u00a0")
_NUMBER_TOKEN: Final = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.$])")
_LITERAL_TOKEN: Final = re.compile(r"(?:true|false|null)(?![\w$-])")
_SINGLE_TOKENS: Final = {"{": 1, "[": 1, "}": 2, "]": 2, ",": 3, ":": 4, '"': 5}
_T_OPEN, _T_CLOSE, _T_COMMA, _T_COLON, _T_STRING, _T_NUMBER, _T_LITERAL, _T_OTHER = range(1, 9)
_MISSING: Final[Any] = object()  # a scalar cut off before anything of it could be read

# Parser states: what the next token may be.
_VALUE: Final = 0  # any value (top level, after a colon)
_ARR_FIRST: Final = 1  # a value or "]" (just after "[")
_ARR_AFTER_COMMA: Final = 2  # a value or "]" (a "]" here means a trailing comma)
_ARR_NEXT: Final = 3  # "," or "]"
_OBJ_FIRST: Final = 4  # a key or "}" (just after "{")
_OBJ_AFTER_COMMA: Final = 5  # a key or "}" (a "}" here means a trailing comma)
_OBJ_NEXT: Final = 6  # "," or "}"
_COLON: Final = 7  # ":" after a key


def loads_lenient(text: str, *, strict_failed: bool = False) -> LenientResult:
    """Decode ``text`` as JSON, tolerating the mistakes models make.

    Args:
        text: the text of one JSON value, possibly malformed, cut off, or followed by other text.
        strict_failed: the caller saw ``json.loads(text)`` fail, so the strict decoder is not run again
            (the lenient pass reads valid JSON followed by other text to the same value and notes).

    Returns:
        The value, the fixes that were needed (empty for valid JSON) and whether the value was complete.

    Raises:
        LenientJSONError: nothing JSON-like starts the text, a token cannot be read, ``NaN`` or
            ``Infinity`` appears, or the nesting is deeper than :data:`MAX_DEPTH`.
    """
    if strict_failed:
        return _Reader(text).read()
    extra_data = False
    try:
        result = LenientResult(_scan_whole(_scan_no_constants, text))
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            return _Reader(text).read()
        extra_data = True
    except LenientJSONError:
        raise
    except (ValueError, RecursionError):  # too many digits for int(); nesting too deep for the C decoder
        return _Reader(text).read()
    if extra_data:  # valid JSON followed by something: a repeat of it, or prose
        reader = _Reader(text)
        start = reader.skip(0)
        value, end = _DECODER.raw_decode(text, start)
        reader.after(start, end)
        result = LenientResult(value, tuple(reader.fixes))
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(result.value) > MAX_DEPTH:
        raise LenientJSONError(f"nesting deeper than {MAX_DEPTH} levels", 0)
    return result


def _reject_constant(name: str) -> Any:
    raise LenientJSONError(f"{name} is not a JSON number", 0)


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
_scan_no_constants: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
# The string scanner behind ``json`` (C-accelerated; missing from the type stubs).
scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


scan_json: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner behind ``json.loads``: ``scan_json(text, i)`` is the JSON value at ``i`` and where it ends.

``json.loads`` and ``JSONDecoder.raw_decode`` are Python wrappers around it; calling it directly gives the
same values without them. It raises ``StopIteration`` when no value starts at ``i`` and
``json.JSONDecodeError`` for a value that breaks off."""
_JSON_WS: Final = re.compile(r"[ \t\n\r]*")


def skip_json_space(text: str, pos: int) -> int:
    """The position after the JSON whitespace (space, tab, line feed, carriage return) at ``pos``."""
    return _JSON_WS.match(text, pos).end()  # type: ignore[union-attr]  # a star pattern always matches


def doubled_braces(text: str) -> tuple[int, int] | None:
    """Where the object inside doubled braces starts and ends, when that is the whole text, else ``None``.

    The text, JSON whitespace around it aside, must be ``{`` + one complete JSON object + ``}``, the braces
    touching: ``{{"name": "f", "arguments": {}}}`` gives the span of ``{"name": "f", "arguments": {}}``.
    Doubled braces with anything around them (a template in prose, a second value) give ``None``.
    """
    start = skip_json_space(text, 0)
    end = len(text.rstrip(" \t\n\r"))
    if not text.startswith("{{", start) or end - start < 4 or text[end - 2 : end] != "}}":
        return None
    try:
        value, stop = scan_json(text, start + 1)
    except (StopIteration, ValueError, RecursionError):
        return None
    if type(value) is not dict or stop != end - 1:
        return None
    return start + 1, stop


def loads_strict(text: str) -> Any:
    """``json.loads(text)`` for a str: the same value, and a ``json.JSONDecodeError`` where it raises one."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _scan_whole(scan_json, text)


def _scan_whole(scan: Callable[[str, int], tuple[Any, int]], text: str) -> Any:
    """``JSONDecoder.decode(text)`` for the decoder whose scanner is ``scan``, without its Python wrappers."""
    start = skip_json_space(text, 0)
    try:
        value, end = scan(text, start)
    except StopIteration as exc:
        raise json.JSONDecodeError("Expecting value", text, exc.value) from None
    end = skip_json_space(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


NOT_JSON: Final[Any] = object()
"""What :func:`strict_value` returns for a text ``json.loads`` refuses."""


def strict_value(text: str) -> Any:
    """``json.loads(text)``, or :data:`NOT_JSON` where it raises."""
    try:
        return loads_strict(text)
    except (ValueError, RecursionError):
        return NOT_JSON


def _depth(value: Any) -> int:
    """Return the nesting depth of a decoded value, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _decode_body(body: str, fixes: list[str]) -> str:
    """Decode the inside of a string literal, tolerating raw control characters and unknown escapes."""
    if _CONTROL.search(body):
        _note(fixes, "raw_newline")
    if "\\" not in body:
        return body
    bad = False

    def unescape(m: re.Match[str]) -> str:
        nonlocal bad
        esc = m.group(1)
        if len(esc) == 5:
            return chr(int(esc[1:], 16))
        simple = _SIMPLE_ESCAPES.get(esc)
        if simple is None:
            bad = True
            return m.group(0)
        return simple

    out = _ESCAPE.sub(unescape, body)
    if bad:
        _note(fixes, "bad_escape")
    if any(_SURROGATE_FIRST <= ch <= _SURROGATE_LAST for ch in out):
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return out


# Written with chr(): a compiled build cannot hold lone surrogates in string literals.
_SURROGATE_FIRST, _SURROGATE_LAST = chr(0xD800), chr(0xDFFF)


_CUT_ESCAPE: Final = re.compile(r"\\u(?:[0-9a-fA-F]{0,3}|[dD][89abAB][0-9a-fA-F]{2})\Z")


def _without_cut_escape(body: str) -> str:
    """``body`` without a ``\\u`` escape cut short at its end, nor the first half of a surrogate pair left there."""
    for _ in range(2):  # a cut-short escape, then the high surrogate it was to follow
        m = _CUT_ESCAPE.search(body)
        if m is None:
            return body
        start = m.start()
        backslashes = start - len(body[:start].rstrip("\\"))  # before this one: an odd count escapes it
        if backslashes % 2:
            return body
        body = body[:start]
    return body


def _note(fixes: list[str], fix: str) -> None:
    if fix not in fixes:
        fixes.append(fix)


class _Reader:
    """One pass over one text; ``read`` returns the first value and notes what followed it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.fixes: list[str] = []
        self.truncated = False

    def read(self) -> LenientResult:
        start = self.skip(0)
        if start >= self.n:
            raise LenientJSONError("no JSON value (the text is empty)", start)
        value, end = self._value_tree(start)
        if self.truncated:
            _note(self.fixes, "missing_closer")
        else:
            self.after(start, end)
        return LenientResult(value, tuple(self.fixes), not self.truncated)

    def after(self, start: int, end: int) -> None:
        """Note a repeated value or other text after the first complete value."""
        i = self.skip(end)
        if i >= self.n:
            return
        first = self.text[start:end]
        if first[0] in "{[" and self.text.startswith(first, i):
            _note(self.fixes, "duplicated_object")
            i = self.skip(i + len(first))
            if i >= self.n:
                return
        _note(self.fixes, "trailing_text")

    def skip(self, i: int) -> int:
        """Skip whitespace, and literal ``\\n``/``\\t``/``\\r`` pairs, which models leave between tokens."""
        text = self.text
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]  # a star pattern always matches
            if i + 1 < self.n and text[i] == "\\" and text[i + 1] in "nrt":
                _note(self.fixes, "stray_escape")
                i += 2
                continue
            return i

    def _value_tree(self, i: int) -> tuple[Any, int]:
        """Read one value starting at ``i``; return it and the offset after it."""
        text = self.text
        n = self.n
        fixes = self.fixes
        root: Any = None
        stack: list[Any] = []  # open containers, innermost last
        openers: list[str] = []  # "{" or "[" for each open container
        keys: list[str | None] = []  # the pending key of each open object (None for arrays)
        state = _VALUE
        while True:
            while i < n and text[i] in _TOKEN_SPACE:
                i += 1
            if i >= n:  # only whitespace is left
                if stack:
                    self.truncated = True
                    return root, n
                raise LenientJSONError("the text ends where a value should start", n)
            pos = i
            c = text[i]
            kind = _SINGLE_TOKENS.get(c, _T_OTHER)
            i += 1
            spelled = ""
            if kind == _T_OTHER:
                if c == "-" or "0" <= c <= "9":
                    m = _NUMBER_TOKEN.match(text, pos)
                    if m is not None:
                        kind, i, spelled = _T_NUMBER, m.end(), m.group()
                elif c == "t" or c == "f" or c == "n":
                    m = _LITERAL_TOKEN.match(text, pos)
                    if m is not None:
                        kind, i, spelled = _T_LITERAL, m.end(), m.group()
            if kind == _T_OTHER and text[pos] == "\\" and text[pos + 1 : pos + 2] in ("n", "r", "t"):
                _note(fixes, "stray_escape")
                i = pos + 2
                continue
            if kind == _T_COMMA:
                if state == _ARR_NEXT:
                    state = _ARR_AFTER_COMMA
                elif state == _OBJ_NEXT:
                    state = _OBJ_AFTER_COMMA
                else:
                    raise LenientJSONError("unexpected ','", pos)
                continue
            if state == _COLON:
                if kind == _T_COLON:
                    state = _VALUE
                    continue
                raise LenientJSONError(f"expected ':' after the key, found {text[pos]!r}", pos)
            if kind == _T_CLOSE:
                if state == _VALUE:
                    raise LenientJSONError(f"expected a value, found {text[pos]!r}", pos)
                if state in (_ARR_AFTER_COMMA, _OBJ_AFTER_COMMA):
                    _note(fixes, "trailing_comma")
                closer = text[pos]
                if _CLOSER_OF[openers[-1]] != closer:
                    want = "{" if closer == "}" else "["
                    if want not in openers:
                        raise LenientJSONError(f"{closer!r} closes nothing that is open", pos)
                    _note(fixes, "mismatched_closer")
                    while openers[-1] != want:
                        stack.pop()
                        openers.pop()
                        keys.pop()
                stack.pop()
                openers.pop()
                keys.pop()
                if not stack:
                    return root, i
                state = _OBJ_NEXT if openers[-1] == "{" else _ARR_NEXT
                continue
            if kind == _T_COLON:
                raise LenientJSONError("unexpected ':'", pos)
            if state >= _OBJ_FIRST:  # a key
                if state == _OBJ_NEXT:
                    _note(fixes, "missing_comma")
                if kind == _T_STRING or text[pos] == "'":
                    key, i, ok = self._string(pos)
                elif kind == _T_OPEN:
                    raise LenientJSONError(f"expected an object key, found {text[pos]!r}", pos)
                else:
                    key, i, ok = self._bare_key(pos)
                if not ok:
                    self.truncated = True
                    return root, n
                keys[-1] = key
                state = _COLON
                continue
            if state == _ARR_NEXT:  # a value
                _note(fixes, "missing_comma")
            if kind == _T_OPEN:
                if len(stack) >= MAX_DEPTH:
                    raise LenientJSONError(f"nesting deeper than {MAX_DEPTH} levels", pos)
                opener = text[pos]
                container: Any = {} if opener == "{" else []
                if stack:
                    self._attach(stack, keys, container)
                else:
                    root = container
                stack.append(container)
                openers.append(opener)
                keys.append(None)
                state = _OBJ_FIRST if opener == "{" else _ARR_FIRST
                continue
            if kind == _T_NUMBER:
                value: Any = _to_number(spelled, pos)
                ok = True
            elif kind == _T_LITERAL:
                value = _JSON_LITERALS[spelled]
                ok = True
            elif kind == _T_STRING:
                value, i, ok = self._string(pos)
            else:
                value, i, ok = self._scalar(pos)
            if not ok:  # cut off inside a scalar at the end of the text
                self.truncated = True
                if not stack:
                    return (None if value is _MISSING else value), n
                if value is not _MISSING:
                    self._attach(stack, keys, value)
                return root, n
            if not stack:
                return value, i
            self._attach(stack, keys, value)
            state = _OBJ_NEXT if openers[-1] == "{" else _ARR_NEXT

    @staticmethod
    def _attach(stack: list[Any], keys: list[str | None], value: Any) -> None:
        if not stack:
            return
        parent = stack[-1]
        if isinstance(parent, dict):
            key = keys[-1]
            assert key is not None  # the state machine reads a key before every object value
            parent[key] = value
            keys[-1] = None
        else:
            parent.append(value)

    def _bare_key(self, i: int) -> tuple[str, int, bool]:
        """Read an unquoted key (an identifier or a number); ``ok`` is False when the text ends inside it."""
        m = _IDENT.match(self.text, i) or _NUMBER.match(self.text, i)
        if m is None:
            raise LenientJSONError(f"expected an object key, found {self.text[i]!r}", i)
        if m.end() >= self.n:
            return "", self.n, False
        _note(self.fixes, "unquoted_keys")
        return m.group(), m.end(), True

    def _string(self, i: int) -> tuple[str, int, bool]:
        """Read a quoted string at ``i``; ``ok`` is False when the text ends inside it."""
        text = self.text
        quote = text[i]
        if quote == '"':
            try:
                value, end = scanstring(text, i + 1, True)
            except ValueError:
                body_match = DQ_BODY.match(text, i + 1)
            else:
                return value, end, True
        else:
            _note(self.fixes, "single_quotes")
            body_match = SQ_BODY.match(text, i + 1)
        assert body_match is not None  # a star pattern always matches
        end = body_match.end()
        if end < self.n and text[end] == quote:
            return _decode_body(body_match.group(), self.fixes), end + 1, True
        # Cut off: a lone trailing backslash is already left out; so is an escape the end cut short.
        return _decode_body(_without_cut_escape(body_match.group()), self.fixes), self.n, False

    def _scalar(self, i: int) -> tuple[Any, int, bool]:
        """Read a string, number or literal at ``i``; ``ok`` is False when cut off at the end."""
        text = self.text
        c = text[i]
        if c == '"' or c == "'":
            return self._string(i)
        if c in _NUMBER_START:
            return self._number(i)
        m = _IDENT.match(text, i)
        if m is None:
            raise LenientJSONError(f"expected a value, found {c!r}", i)
        word = m.group()
        if word in _JSON_LITERALS:
            return _JSON_LITERALS[word], m.end(), True
        if word in _PY_LITERALS:
            _note(self.fixes, "python_literals")
            return _PY_LITERALS[word], m.end(), True
        if word in _NON_FINITE:
            raise LenientJSONError(f"{word} is not a JSON number", i)
        if m.end() >= self.n and word in _LITERAL_PREFIXES:
            return _MISSING, self.n, False
        raise LenientJSONError(f"unquoted text {word[:40]!r} where a value should be", i)

    def _number(self, i: int) -> tuple[Any, int, bool]:
        text = self.text
        m = _NUMBER.match(text, i)
        if m is None:
            rest = text[i + 1 : i + 9].lower()
            if rest.startswith(("inf", "nan")):
                raise LenientJSONError("NaN and Infinity are not JSON numbers", i)
            if i + 1 >= self.n:  # a lone sign at the very end
                return _MISSING, self.n, False
            raise LenientJSONError(f"expected a number, found {text[i : i + 10]!r}", i)
        s = m.group()
        end = m.end()
        if _STRICT_NUMBER.fullmatch(s) is None:
            if s[-1] in "eE+-":  # the exponent was cut off
                if end >= self.n:
                    return _to_number(s.rstrip("eE+-"), i), self.n, False
                raise LenientJSONError(f"malformed number {s!r}", i)
            _note(self.fixes, "loose_number")
        return _to_number(s, i), end, True


def _to_number(s: str, pos: int) -> int | float:
    try:
        if "." in s or "e" in s or "E" in s:
            return float(s)
        return int(s)
    except ValueError as exc:  # e.g. more digits than int() converts
        raise LenientJSONError(f"unreadable number ({exc})", pos) from exc
