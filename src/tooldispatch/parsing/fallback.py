"""The fallback stage: call-like text that no strict format claimed.

It runs only on the parts of the output the strict stage left (``exclude`` spans are skipped) and finds:

* JSON call objects: ``{"name": ..., "arguments": {...}}`` (name keys ``name``/``function``/``tool``/
  ``tool_name``/``function_name``/``action``; argument keys ``arguments``/``parameters``/``args``/``input``/
  ``tool_input``/``action_input``/``params``), arguments given as a JSON string, ``{"get_weather": {...}}``,
  lists of these, and calls nested in a wrapper object (``{"tool_calls": [...]}``, ``{"function": {...}}``);
* a tool name written outside its arguments object: ``update_record {...}``, ``get_weather({...})``,
  ``get_weather: {...}``, ReAct's ``Action: get_weather`` / ``Action Input: {...}``, one stray word between
  an exact declared name and its object (``get_weather now {...}``, tolerance ``stray_word``);
* python-call syntax ``get_weather(city="Paris")``, read with :mod:`ast` (literal values only, never evaluated);
* any of these inside tolerant wrappers: misspelled, re-cased or spaced ``<tool_call>`` tags, ``<toolcall>``,
  ``<function_call>``, ``<tools>``, Markdown fences of any language, and a final tag or fence never closed.

**False-positive guard.** A candidate needs an anchor: a declared tool name (exact, or resolved by
:func:`tooldispatch.repair.resolve_name` at the ``bounded`` level) and an arguments object (a python call with
no arguments counts only for a tool with no required arguments). Placeholders copied from a prompt
(``tool_name``, ``<function-name>``, ``{...}``, ``{{ name }}``, ``"..."`` values), echoed tool schemas, and JSON
that names no declared tool are never candidates. When the name stands outside the object, at least one key of
the object must be one of the tool's parameters (so that ``the result of get_weather: {"temp": 20}`` stays prose).

Names are kept as written (repair resolves them later), except that a namespace prefix such as ``functions.``
is dropped. Each :class:`RawCall` has ``format`` set to the shape (``json``, ``named_json``, ``react``,
``python_call``), prefixed by the wrapper when there was one (``tag:json``, ``fence:python_call``). Its
``lenient`` lists the lenient-JSON fixes plus the wrapper tolerances: ``wrapper_tag`` (a tag other than
``<tool_call>``), ``fence`` and ``unclosed_tag``. A span covers the wrapper, list brackets and separators that
belong to the call, so none of them is left in the content.

Every pattern here is linear: character classes with bounded repeats or unambiguous ``[^"\\\\]*(?:\\\\.[^"\\\\]*)*``
string bodies; brace and parenthesis matching is a single forward scan with a counter.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rapidfuzz.distance import Levenshtein

from tooldispatch.parsing._fallback_values import (
    PLACEHOLDER_TEXT,
    is_placeholder_args,
    is_schema_echo_object,
    looks_like_schema,
    may_be_stray,
    parse_kwargs,
)
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_FENCE,
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    SCAN_FIRST_MAX,
    raw_decode_at,
)
from tooldispatch.parsing.lenient import DQ_BODY, SQ_BODY, LenientJSONError, loads_lenient
from tooldispatch.repair.names import resolve_name
from tooldispatch.toolspec import ToolSpec

__all__ = ["find_fallback"]

NAME_KEYS: Final = ("name", "function", "tool", "tool_name", "function_name", "action")
ARGUMENT_KEYS: Final = ("arguments", "parameters", "args", "input", "tool_input", "action_input", "params")
PLACEHOLDER_NAMES: Final = frozenset(
    {"tool_name", "function_name", "tool", "function", "name", "func_name", "your_tool", "example", "tool_call"}
)
_WRAPPER_TAGS: Final = frozenset(
    {"toolcall", "toolcalls", "functioncall", "functioncalls", "tools", "tool", "toolcode"}
)
FIX_TAG: Final = "wrapper_tag"
FIX_STRAY_WORD: Final = "stray_word"  # one word between a declared name and its object
"""Fix recorded when a tool-call tag was misspelled, re-cased or spaced (``<Tool_Call>``, ``<toolcall>``)."""
_RESCAN_DEPTH: Final = 2  # how many wrapper objects deep calls are looked for (``{"tool_calls": [{...}]}``)

_TAG: Final = re.compile(r"<\|?[ \t]*(/?)[ \t]*([A-Za-z][A-Za-z0-9 _\-]{0,30}?)[ \t]*\|?>")
_FENCE: Final = re.compile(r"```[ \t]*([\w+\-]*)[ \t]*\n?")
_IN_OBJECT: Final = re.compile(r"\{+|\}|[\"']")
_IN_CALL: Final = re.compile(r"[()\[\]{}\"']")
_VALID_NAME: Final = re.compile(r"[A-Za-z_][\w.\-]{0,127}")
_KWARG_START: Final = re.compile(r"\s*[A-Za-z_]\w*\s*=(?!=)")
_SEPARATORS: Final = re.compile(r"[\s_\-]")
_CLOSE_PAREN: Final = re.compile(r"\s*\)")
_REACT_BEFORE: Final = re.compile(
    r"Action[ \t]*:[ \t]*([A-Za-z_][\w.\-]{0,127})[ \t]*\r?\n[ \t]*Action[ \t]+Input[ \t]*:\s*\Z"
)
_DEF_BEFORE: Final = re.compile(r"(?:def|class|function|fn)[ \t]+\Z")
_SALVAGE_NAME: Final = re.compile(
    r"\{\s*[\"']?(?:name|function|tool|tool_name|function_name)[\"']?[ \t]*:[ \t]*[\"']([^\"'\n]{1,128})[\"']"
)
_SALVAGE_ARGS: Final = re.compile(
    r"[\"']?(?:arguments|parameters|args|input|tool_input|action_input|params)[\"']?[ \t]*:[ \t]*(?=[{\"'])"
)
_SALVAGE_KEYED: Final = re.compile(r"\{\s*[\"']?([A-Za-z_][\w.\-]{0,127})[\"']?[ \t]*:[ \t]*(?=\{)")
_LIST_OPEN: Final = re.compile(r"\[\s*\Z")
_LIST_CLOSE: Final = re.compile(r"\s*\]")
_SEPARATOR: Final = re.compile(r"[\s,;]*")
_WINDOW: Final = 256  # how far back a name outside its object is looked for
# The tool's own name used as a tag around its arguments: ``<get_weather>{...}</get_weather>`` (exact names only).
_NAME_TAG_BEFORE: Final = re.compile(r"<([A-Za-z_][\w.\-]{0,127})>\s*\Z")


@dataclass(init=False, slots=True)
class _Found:
    start: int
    end: int
    call: RawCall
    wrapper: str = ""  # "tag" or "fence" when wrapped
    wrapper_fixes: tuple[str, ...] = ()

    def __init__(
        self, start: int, end: int, call: RawCall, wrapper: str = "", wrapper_fixes: tuple[str, ...] = ()
    ) -> None:
        self.start = start
        self.end = end
        self.call = call
        self.wrapper = wrapper
        self.wrapper_fixes = wrapper_fixes

    def finish(self, text: str) -> RawCall:
        call = self.call
        fmt = f"{self.wrapper}:{call.format}" if self.wrapper else call.format
        lenient = call.lenient + tuple(x for x in self.wrapper_fixes if x not in call.lenient)
        return RawCall(
            (self.start, self.end), text[self.start : self.end], fmt, call.stage, call.name, call.arguments,
            call.arguments_text, call.decode_error, call.truncated, lenient, call.flags,
        )  # fmt: skip


@dataclass(init=False, slots=True)
class _Wrapper:
    start: int  # the opening tag or fence
    body: int  # where its content starts
    body_end: int  # where its content ends
    end: int  # after the closing tag or fence (the region end when unclosed)
    kind: str  # "tag" or "fence"
    closed: bool

    def __init__(self, start: int, body: int, body_end: int, end: int, kind: str, closed: bool) -> None:
        self.start = start
        self.body = body
        self.body_end = body_end
        self.end = end
        self.kind = kind
        self.closed = closed

    def fixes(self, text: str) -> tuple[str, ...]:
        """The wrapper tolerances this wrapper needed."""
        out: list[str] = []
        if self.kind == "fence":
            out.append(FIX_FENCE)
        elif text[self.start : self.body].strip() != "<tool_call>" or (
            self.closed and text[self.body_end : self.end].strip() != "</tool_call>"
        ):
            out.append(FIX_TAG)
        if not self.closed:
            out.append(FIX_UNCLOSED)
        return tuple(out)


def find_fallback(
    text: str, tools: Mapping[str, ToolSpec], *, exclude: Sequence[tuple[int, int]] = ()
) -> list[RawCall]:
    """Find anchored call-like spans in the parts of ``text`` no strict format claimed.

    Args:
        text: the model output (content, or reasoning when calls are looked for there).
        tools: the declared tools by name.
        exclude: spans already claimed by the strict stage; nothing inside them is looked at.

    Returns:
        The candidates in text order, with ``stage="fallback"``, non-overlapping, names as written.
    """
    if not tools or not text:
        return []
    out: list[RawCall] = []
    for start, end in _free_regions(len(text), exclude):
        if end > start:
            out.extend(_Region(text, start, end, tools).find())
    return out


def _free_regions(n: int, exclude: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    regions: list[tuple[int, int]] = []
    pos = 0
    for s, e in sorted((max(0, s), min(n, e)) for s, e in exclude if e > s):
        if s > pos:
            regions.append((pos, s))
        pos = max(pos, e)
    if pos < n:
        regions.append((pos, n))
    return regions


class _Region:
    """One stretch of unclaimed text; offsets are absolute positions in the full text."""

    def __init__(self, text: str, start: int, end: int, tools: Mapping[str, ToolSpec]) -> None:
        self.text = text
        self.lo = start
        self.hi = end
        self.at_end = end == len(text)
        self.tools = tools
        self.anchors: dict[str, str | None] = {}

    def find(self) -> list[RawCall]:
        pairs, unclosed = _scan_objects(self.text, self.lo, self.hi)
        found = self._objects(pairs, unclosed, self.hi, 0)
        objects = pairs + ([(unclosed[0], self.hi)] if unclosed else [])
        found.extend(self._python_calls(objects))
        found.sort(key=lambda f: f.start)
        kept: list[_Found] = []
        for f in found:
            if not kept or f.start >= kept[-1].end:
                kept.append(f)
        if not kept:
            return []
        self._wrap(kept)
        self._absorb_separators(kept)
        return [f.finish(self.text) for f in kept]

    # -- JSON objects -------------------------------------------------------------------------------

    def _objects(self, pairs: list[tuple[int, int]], unclosed: list[int], hi: int, depth: int) -> list[_Found]:
        found: list[_Found] = []
        limit = hi
        for u in unclosed[:3]:  # outermost first; an object cut off at the end of the region
            hit = self._object(u, hi, closed=False, depth=depth)
            if hit:
                found.extend(hit)
                limit = u
                break
        for s, e in pairs:
            if s >= limit:
                break
            found.extend(self._object(s, e, closed=True, depth=depth))
        return found

    def _object(self, s: int, e: int, *, closed: bool, depth: int) -> list[_Found]:
        """Candidates from the object at ``[s, e)`` (``closed=False``: it runs unclosed to ``e``)."""
        obj_text = self.text[s:e]
        try:
            decoded = loads_lenient(obj_text)
        except LenientJSONError as exc:
            salvaged = self._salvage(s, e, obj_text, str(exc), closed=closed)
            return [salvaged] if salvaged else []
        value = decoded.value
        if not isinstance(value, dict) or is_schema_echo_object(value):
            return []
        truncated = not decoded.complete and self.at_end and e == self.hi
        fixes = decoded.fixes
        call = self._call_from_dict(value, obj_text, fixes, truncated)
        if call is not None:
            return [_Found(s, e, call)]
        named = self._named_object(s, e, value, obj_text, decoded.fixes, truncated)
        if named is not None:
            return [named]
        if closed and depth < _RESCAN_DEPTH and e - s > 2:
            pairs, unclosed = _scan_objects(self.text, s + 1, e - 1)
            inner = self._objects(pairs, unclosed, e - 1, depth + 1)
            _partition(inner, s, e)  # the wrapper object belongs to the calls it holds
            return inner
        return []

    def _call_from_dict(
        self, value: dict[str, Any], obj_text: str, fixes: tuple[str, ...], truncated: bool
    ) -> RawCall | None:
        """A call written as one object: ``{"name": ..., "arguments": ...}`` or ``{"tool": {...}}``."""
        name: str | None = None
        for key in NAME_KEYS:
            candidate = value.get(key)
            if isinstance(candidate, str):
                name = candidate
                break
        if name is None:
            if len(value) != 1:
                return None
            ((key, args),) = value.items()
            resolved = self._anchor(key)
            if resolved is None or not isinstance(args, dict) or not self._keys_fit(resolved, args):
                return None
            if is_placeholder_args(args) or looks_like_schema(args, self.tools[_canonical(resolved, self.tools)]):
                return None
            return _raw_call("json", resolved, args, obj_text, fixes=fixes, truncated=truncated)
        resolved = self._anchor(name)
        if resolved is None:
            return None
        arg_key = next((k for k in ARGUMENT_KEYS if k in value), None)
        if arg_key is None:
            return None
        args = value[arg_key]
        spec = self.tools[_canonical(resolved, self.tools)]
        if isinstance(args, str):
            return self._string_arguments(resolved, args, obj_text, fixes, truncated)
        if is_placeholder_args(args) or looks_like_schema(args, spec):
            return None
        return _raw_call("json", resolved, args, obj_text, fixes=fixes, truncated=truncated)

    def _string_arguments(
        self, name: str, args: str, obj_text: str, fixes: tuple[str, ...], truncated: bool
    ) -> RawCall | None:
        """Arguments given as a JSON string: decode it leniently, keeping its own fixes."""
        if PLACEHOLDER_TEXT.fullmatch(args):
            return None
        if not args.strip():
            return _raw_call("json", name, {}, obj_text, args_text=args, fixes=fixes, truncated=truncated)
        try:
            inner = loads_lenient(args)
        except LenientJSONError as exc:
            return _raw_call(
                "json", name, None, obj_text, args_text=args, fixes=fixes, truncated=truncated, error=str(exc)
            )
        merged = fixes + tuple(f for f in inner.fixes if f not in fixes)
        if isinstance(inner.value, dict) and is_placeholder_args(inner.value):
            return None
        cut = None if inner.complete or truncated else "the arguments string ends inside a value"
        return _raw_call(
            "json",
            name,
            inner.value if cut is None else None,
            obj_text,
            args_text=args,
            fixes=merged,
            truncated=truncated,
            error=cut,
        )

    def _named_object(
        self, s: int, e: int, args: dict[str, Any], obj_text: str, fixes: tuple[str, ...], truncated: bool
    ) -> _Found | None:
        """An arguments object with the tool name written before it."""
        window_start = max(self.lo, s - _WINDOW)
        react = _REACT_BEFORE.search(self.text, window_start, s)
        tag = None if react is not None else _NAME_TAG_BEFORE.search(self.text, max(self.lo, s - 160), s)
        if react is not None:
            fmt, name, start, paren = "react", react.group(1), react.start(), False
        elif tag is not None and tag.group(1) in self.tools:
            fmt, name, start, paren = "named_tag", tag.group(1), tag.start(), False
        else:
            found = _name_before(self.text, s, self.lo)
            if found is None:
                return None
            fmt, (name, start, paren) = "named_json", found
            if (stray := None if paren else self._stray_word(name, start)) is not None:
                (name, start), fixes = stray, (*fixes, FIX_STRAY_WORD)
            if _DEF_BEFORE.search(self.text, max(self.lo, start - 16), start):
                return None
        resolved = self._anchor(name)
        if resolved is None or is_placeholder_args(args):
            return None
        spec = self.tools[_canonical(resolved, self.tools)]
        if not self._keys_fit(resolved, args) or looks_like_schema(args, spec):
            return None
        end = e
        if paren:
            close = _CLOSE_PAREN.match(self.text, e, self.hi)
            if close:
                end = close.end()
        elif fmt == "named_tag":
            closing = re.compile(rf"\s*</{re.escape(name)}>").match(self.text, e, self.hi)
            if closing:
                end = closing.end()
        call = _raw_call(fmt, resolved, args, obj_text, fixes=fixes, truncated=truncated)
        return _Found(start, end, call)

    def _stray_word(self, word: str, start: int) -> tuple[str, int] | None:
        """The declared name (exact) and its start when ``word`` before an object is one stray word after it."""
        if word in self.tools or not may_be_stray(word):
            return None
        named = _name_ending_at(self.text, start, self.lo)
        return named if named is not None and named[0] in self.tools and named[1] != start else None

    def _salvage(self, s: int, e: int, obj_text: str, error: str, *, closed: bool) -> _Found | None:
        """A call object whose JSON cannot be read: keep the name when it is anchored, and the error."""
        truncated = not closed and self.at_end and e == self.hi
        name_m = _SALVAGE_NAME.match(obj_text)  # the name is the first key of a call object
        if name_m is not None:
            args_m = _SALVAGE_ARGS.search(obj_text)
        else:
            name_m = args_m = _SALVAGE_KEYED.match(obj_text)
        if name_m is None or args_m is None:
            return None
        resolved = self._anchor(name_m.group(1))
        if resolved is None:
            return None
        args_text = _value_text(obj_text, args_m.end())
        if PLACEHOLDER_TEXT.fullmatch(args_text):
            return None
        if args_text.startswith(("'", '"')):
            with contextlib.suppress(LenientJSONError):
                args_text = str(loads_lenient(args_text).value)
            if PLACEHOLDER_TEXT.fullmatch(args_text):
                return None
        try:
            inner = loads_lenient(args_text)
        except LenientJSONError as exc:
            error = str(exc)
        else:
            if isinstance(inner.value, dict) and not is_placeholder_args(inner.value):
                call = _raw_call(
                    "json", resolved, inner.value, obj_text, args_text=args_text, fixes=inner.fixes, truncated=truncated
                )
                return _Found(s, e, call)
            return None
        call = _raw_call("json", resolved, None, obj_text, args_text=args_text, truncated=truncated, error=error)
        return _Found(s, e, call)

    # -- python-call syntax -------------------------------------------------------------------------

    def _python_calls(self, objects: list[tuple[int, int]]) -> list[_Found]:
        """``name(key=value, ...)`` outside JSON objects."""
        found: list[_Found] = []
        text = self.text
        taken = sorted(objects)
        t = 0
        paren = text.find("(", self.lo, self.hi)
        while paren >= 0:
            nxt = paren + 1
            named = _name_ending_at(text, paren, self.lo)
            if named is not None:
                while t < len(taken) and taken[t][1] <= named[1]:
                    t += 1
                if not (t < len(taken) and taken[t][0] <= named[1]):  # not inside a JSON object
                    hit, nxt = self._python_at(named[0], named[1], paren)
                    if hit is not None:
                        found.append(hit)
            if nxt >= self.hi:
                break  # everything after an unclosed call is inside it
            paren = text.find("(", nxt, self.hi)
        return found

    def _python_at(self, name: str, start: int, paren: int) -> tuple[_Found | None, int]:
        """The call whose name starts at ``start``, and where to look for the next one."""
        resolved = self._anchor(name)
        if resolved is None or _DEF_BEFORE.search(self.text, max(self.lo, start - 16), start):
            return None, paren + 1
        if self.text[paren + 1 : paren + 65].lstrip().startswith("{"):
            return None, paren + 1  # ``name({...})``: the object finder reads it
        close = _match_call(self.text, paren, self.hi)
        if close is None:
            call = self._truncated_python(resolved, paren)
            return (_Found(start, self.hi, call) if call is not None else None), self.hi
        call = self._python_call(resolved, self.text[paren + 1 : close - 1])
        return (_Found(start, close, call) if call is not None else None), close

    def _python_call(self, name: str, inner: str) -> RawCall | None:
        parsed = parse_kwargs(inner)
        if parsed is None:
            return None
        if not parsed and self.tools[_canonical(name, self.tools)].required:
            return None  # ``name()`` for a tool that needs arguments is prose, not a call
        if is_placeholder_args(parsed):
            return None
        return _raw_call("python_call", name, parsed, inner, args_text=inner)

    def _truncated_python(self, name: str, open_paren: int) -> RawCall | None:
        inner = self.text[open_paren + 1 : self.hi]
        if not self.at_end or not _KWARG_START.match(inner):
            return None
        for closer in (")", '")', "')", "])", '"])', "'])", "})", '"})', "'})"):
            parsed = parse_kwargs(inner + closer[:-1])
            if parsed is not None:
                return _raw_call(
                    "python_call", name, parsed, inner, args_text=inner, fixes=(FIX_INCOMPLETE,), truncated=True
                )
        return _raw_call("python_call", name, None, inner, args_text=inner, truncated=True, error="the call is cut off")

    # -- anchors --------------------------------------------------------------------------------------

    def _anchor(self, name: str) -> str | None:
        """The name as it should be reported when it anchors a candidate, else ``None``."""
        if name in self.tools:
            return name
        if name in self.anchors:
            return self.anchors[name]
        self.anchors[name] = found = self._resolve_anchor(name)
        return found

    def _resolve_anchor(self, name: str) -> str | None:
        if not _VALID_NAME.fullmatch(name) or name.lower() in PLACEHOLDER_NAMES:
            return None
        if "." in name:
            tail = name.rsplit(".", 1)[1]
            if tail in self.tools:
                return tail
            if _resolve(tail, self.tools) is not None:
                return tail
        return name if _resolve(name, self.tools) is not None else None

    def _keys_fit(self, name: str, args: Mapping[str, Any]) -> bool:
        """True when the object's keys look like this tool's parameters (a name outside its object)."""
        props = self.tools[_canonical(name, self.tools)].properties
        if not args:
            return not props or not self.tools[_canonical(name, self.tools)].required
        wanted = {_norm(p) for p in props}
        return any(_norm(k) in wanted for k in args)

    # -- spans ----------------------------------------------------------------------------------------

    def _wrap(self, kept: list[_Found]) -> None:
        """Grow candidates over the tags or fences around them, and mark the wrapper in ``format``."""
        if self.text.find("<", self.lo, self.hi) < 0 and self.text.find("```", self.lo, self.hi) < 0:
            return
        k = 0
        for w in _wrappers(self.text, self.lo, self.hi):
            while k < len(kept) and kept[k].start < w.body:
                k += 1
            inside = []
            j = k
            while j < len(kept) and kept[j].end <= w.body_end:
                inside.append(kept[j])
                j += 1
            if not inside:
                continue
            # A call that starts inside the wrapper but runs past it keeps the wrapper's end for itself.
            end = w.end if j == len(kept) or kept[j].start >= w.end else inside[-1].end
            start = w.start if k == 0 or kept[k - 1].end <= w.start else inside[0].start
            _partition(inside, start, end)
            fixes = w.fixes(self.text)
            for f in inside:
                f.wrapper, f.wrapper_fixes = w.kind, fixes
            k = j
        for i, f in enumerate(kept):  # a closing tag with no opening one, right after the call
            limit = kept[i + 1].start if i + 1 < len(kept) else self.hi
            gap = _SEPARATOR.match(self.text, f.end, limit)
            m = _TAG.match(self.text, gap.end(), limit) if gap else None
            if m and m.group(1) and is_wrapper_name(m.group(2)):
                f.end = m.end()

    def _absorb_separators(self, kept: list[_Found]) -> None:
        """Give commas, semicolons and list brackets between neighbouring calls to the calls."""
        text = self.text
        run_start = 0
        for i in range(1, len(kept) + 1):
            gap = _SEPARATOR.match(text, kept[i - 1].end, kept[i].start) if i < len(kept) else None
            joined = gap is not None and gap.end() == kept[i].start
            if joined:
                kept[i].start = kept[i - 1].end
                continue
            first, last = kept[run_start], kept[i - 1]
            opening = _LIST_OPEN.search(text, max(self.lo, first.start - 64), first.start)
            closing = _LIST_CLOSE.match(text, last.end, self.hi)
            if opening and closing:
                first.start = opening.start()
                last.end = closing.end()
            run_start = i


# -- scanning helpers ---------------------------------------------------------------------------------


def _scan_objects(text: str, lo: int, hi: int) -> tuple[list[tuple[int, int]], list[int]]:
    """Outermost balanced ``{...}`` spans in ``[lo, hi)`` and the openers still unclosed at ``hi``.

    Quotes count as string delimiters only inside an object (prose has apostrophes), and a single quote only
    where a value or key can start.
    """
    pairs: list[tuple[int, int]] = []
    stack: list[int] = []
    i = lo
    short = len(text) <= SCAN_FIRST_MAX
    while i < hi:
        if not stack:
            j = text.find("{", i, hi)
            if j < 0:
                break
            if short:
                # A valid JSON object's span is where the scanner ends it (its strings hold any quote).
                done = raw_decode_at(text, j, hi)
                if done is not None:
                    pairs.append((j, done[1]))
                    i = done[1]
                    continue
            stack.append(j)
            i = j + 1
            continue
        m = _IN_OBJECT.search(text, i, hi)
        if m is None:
            break
        j = m.start()
        c = text[j]
        if c == "{":  # a run of openers at once
            i = m.end()
            stack.extend(range(j, i))
        elif c == "}":
            s = stack.pop()
            i = j + 1
            if not stack:
                pairs.append((s, i))
        elif c == '"' or _value_can_start(text, j, lo):
            body = (DQ_BODY if c == '"' else SQ_BODY).match(text, j + 1, hi)
            end = body.end() if body else hi
            i = end + 1 if end < hi and text[end] == c else hi
        else:
            i = j + 1
    return pairs, stack


def _value_can_start(text: str, j: int, lo: int) -> bool:
    k = j - 1
    while k >= lo and text[k] in " \t\r\n":
        k -= 1
    return k >= lo and text[k] in "{[,:("


def _match_call(text: str, open_paren: int, hi: int) -> int | None:
    """The offset after the parenthesis that closes the one at ``open_paren``, or ``None``."""
    depth = 0
    i = open_paren
    while i < hi:
        m = _IN_CALL.search(text, i, hi)
        if m is None:
            return None
        j = m.start()
        c = text[j]
        if c in "([{":
            depth += 1
            i = j + 1
        elif c in ")]}":
            depth -= 1
            i = j + 1
            if depth == 0:
                return i if c == ")" else None
        else:
            body = (DQ_BODY if c == '"' else SQ_BODY).match(text, j + 1, hi)
            end = body.end() if body else hi
            if end >= hi or text[end] != c:
                return None
            i = end + 1
    return None


def _partition(found: list[_Found], start: int, end: int) -> None:
    """Share ``[start, end)`` among the calls found inside it, so none of the wrapper is left as content."""
    if not found:
        return
    found[0].start = start
    for prev, cur in itertools.pairwise(found):
        cur.start = prev.end
    found[-1].end = end


def _value_text(text: str, start: int) -> str:
    """The JSON value text starting at ``start``: a balanced object, or a quoted string (to the end if cut)."""
    c = text[start : start + 1]
    if c == "{":
        pairs, _ = _scan_objects(text, start, len(text))
        if pairs and pairs[0][0] == start:
            return text[start : pairs[0][1]]
        return text[start:]
    if c in ("'", '"'):
        body = (DQ_BODY if c == '"' else SQ_BODY).match(text, start + 1)
        end = body.end() if body else len(text)
        return text[start : end + 1]
    return text[start:]


def _wrappers(text: str, lo: int, hi: int) -> list[_Wrapper]:
    """Tolerant tool-call tags and Markdown fences in ``[lo, hi)``, outermost only, in order."""
    found: list[_Wrapper] = []
    opened: tuple[int, int] | None = None
    for m in _TAG.finditer(text, lo, hi):
        if not is_wrapper_name(m.group(2)):
            continue
        if not m.group(1):  # an opening tag; an earlier one left open ends here
            if opened is not None:
                found.append(_Wrapper(opened[0], opened[1], m.start(), m.start(), "tag", closed=False))
            opened = (m.start(), m.end())
        elif opened is not None:
            found.append(_Wrapper(opened[0], opened[1], m.start(), m.end(), "tag", closed=True))
            opened = None
    if opened is not None:
        found.append(_Wrapper(opened[0], opened[1], hi, hi, "tag", closed=False))
    fence_open: tuple[int, int] | None = None
    for m in _FENCE.finditer(text, lo, hi):
        if fence_open is None:
            fence_open = (m.start(), m.end())
        else:
            found.append(_Wrapper(fence_open[0], fence_open[1], m.start(), m.start() + 3, "fence", closed=True))
            fence_open = None
    if fence_open is not None:
        found.append(_Wrapper(fence_open[0], fence_open[1], hi, hi, "fence", closed=False))
    found.sort(key=lambda w: (w.start, -w.end))
    outer: list[_Wrapper] = []
    for w in found:
        if not outer or w.start >= outer[-1].end:
            outer.append(w)
    return outer


def is_wrapper_name(raw: str) -> bool:
    """True for a tag name that reads as a tool-call wrapper (``tool_call`` misspelled, re-cased, spaced)."""
    known = _wrapper_names.get(raw)
    if known is not None:
        return known
    name = _SEPARATORS.sub("", raw).lower()
    found = name in _WRAPPER_TAGS or (
        len(name) >= 6
        and (
            Levenshtein.distance(name, "toolcall", score_cutoff=2) <= 2
            or Levenshtein.distance(name, "functioncall", score_cutoff=2) <= 2
        )
    )
    if len(_wrapper_names) >= _WRAPPER_NAMES_KEPT:
        _wrapper_names.clear()
    _wrapper_names[raw] = found
    return found


# A pure cache of immutable results: the answers for the tag names seen last (a model writes the same few tags
# over and over).
_wrapper_names: dict[str, bool] = {}
_WRAPPER_NAMES_KEPT: Final = 256


def _name_ending_at(text: str, end: int, lo: int) -> tuple[str, int] | None:
    """The identifier just before ``end`` (spaces or tabs may come between), and where it starts."""
    k = end
    while k > lo and text[k - 1] in " \t":
        k -= 1
    stop = k
    while k > lo and stop - k <= 128 and (text[k - 1].isalnum() or text[k - 1] in "_.-"):
        k -= 1
    if k == stop or (k > lo and (text[k - 1].isalnum() or text[k - 1] in "_.-$")):
        return None
    m = _VALID_NAME.match(text, k, stop)
    if m is None or m.end() != stop:
        return None
    return m.group(), k


def _name_before(text: str, s: int, lo: int) -> tuple[str, int, bool] | None:
    """The identifier written just before offset ``s`` (``name {``, ``name({``, ``name: {``, ``name = {``).

    Returns the name, its start, and whether an opening parenthesis came between it and ``s``.
    """
    k = s
    while k > lo and text[k - 1] in " \t\r\n":
        k -= 1
    paren = False
    if k > lo and text[k - 1] in "(:=":
        paren = text[k - 1] == "("
        k -= 1
    elif k - 1 > lo and text[k - 2 : k] == "->":
        k -= 2
    named = _name_ending_at(text, k, lo)
    return None if named is None else (named[0], named[1], paren)


# -- small helpers ------------------------------------------------------------------------------------


def _raw_call(
    fmt: str,
    name: str,
    arguments: Any,
    raw: str,
    *,
    args_text: str | None = None,
    fixes: tuple[str, ...] = (),
    truncated: bool = False,
    error: str | None = None,
) -> RawCall:
    return RawCall(
        span=(-1, -1),
        raw=raw,
        format=fmt,
        stage="fallback",
        name=name,
        arguments=arguments,
        arguments_text=args_text if args_text is not None else (raw if fixes else None),
        decode_error=error,
        truncated=truncated,
        lenient=fixes,
    )


def _norm(name: str) -> str:
    return _SEPARATORS.sub("", name).lower()


def _canonical(name: str, tools: Mapping[str, ToolSpec]) -> str:
    """The declared name an anchored name stands for."""
    if name in tools:
        return name
    resolved = _resolve(name, tools)
    assert resolved is not None  # only called on anchored names
    return resolved


def _resolve(name: str, tools: Mapping[str, ToolSpec]) -> str | None:
    resolved, _ = resolve_name(name, tools, level="bounded")
    return resolved
