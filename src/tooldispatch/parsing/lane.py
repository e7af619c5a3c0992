"""The strict lane: the common well-formed outputs, read straight to the outcome the cascade would give.

Most outputs of a model that follows its chat template are one of a few shapes: prose (or nothing)
around ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks, optionally after one
leading ``<think>`` block, one bare Llama 3 JSON call object, or a bare JSON list of call objects (which
the cascade reads in its fallback stage). :func:`strict_outcome` reads those with
``str.find`` and one call of the C JSON scanner per payload, then checks each call with its tool's
compiled schema check. It answers only when the cascade would accept every call with no schema repair
(the one tolerance it takes is arguments written as a JSON string, which it records as the cascade
does); anything else (a foreign marker, text that could anchor another stage, a body that is not
strict JSON, an undeclared name, a placeholder, an echoed schema, arguments the check does not
accept) returns ``None`` and the cascade reads the text. Tests compare both on every shape this
module tells apart, on the labelled corpus, and on random mixes of tags, calls and prose.
"""

from __future__ import annotations

import re
from typing import Any, Final

from tooldispatch.parsing._fallback_values import is_placeholder_args
from tooldispatch.parsing._markers import PLAIN_ANY, SHORT, contains_any
from tooldispatch.parsing._markers import find as find_marker
from tooldispatch.parsing.earned import prose_refuses
from tooldispatch.parsing.formats._common import (
    FIX_ARGUMENTS_STRING,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    is_placeholder,
    is_schema_echo,
)
from tooldispatch.parsing.lenient import scan_json, skip_json_space
from tooldispatch.repair.validate import Check, fast_check, stamp
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import (
    FLAG_IN_REASONING,
    FLAG_NO_CALL,
    Bucket,
    Candidate,
    Checked,
    ParseOutcome,
    Repair,
    Stage,
    ToolCall,
)

HERMES: Final = "hermes"
LLAMA3_JSON: Final = "llama3_json"

# The same rules as ``json.loads``: JSON whitespace around one value, decoded by the C scanner.
_JSON_WS: Final = " \t\n\r"
# A character that could start something another stage reads (see ``formats.hermes``).
_anchor = re.compile(r"[{(<\[`]").search
# Markers that make another format read the text (the ``<think>`` tag is handled here).
_FOREIGN: Final = ("<|", "<｜", "THINK]", "<arg_key>")
_THINK: Final = ("think>",)
_TOKENS: Final = ("<|", "<｜", "think>", "THINK]")  # what sends a bare JSON output to the cascade
_BRACKET_THINK: Final = ("THINK]",)
_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
_PLACEHOLDER_BODY_MAX: Final = 400
_LIST_GAP_MAX: Final = 60  # the fallback stage looks this far back from a call for the list's opening bracket
_NO_FLAGS: Final[frozenset[str]] = frozenset()
_NO_CALL: Final[frozenset[str]] = frozenset({FLAG_NO_CALL})
_IN_REASONING: Final[frozenset[str]] = frozenset({FLAG_IN_REASONING})
AS_STRING: Final = (Repair("json", "", FIX_ARGUMENTS_STRING, None),)
"""The repairs of a call accepted with its arguments written as a JSON string (the one tolerance taken here)."""
# Stage, bucket and repairs of a call accepted as written, by whether its arguments were a JSON string.
_AS_WRITTEN: Final[dict[bool, tuple[Stage, Bucket, tuple[Repair, ...]]]] = {
    False: ("strict", "ok_strict", ()),
    True: ("fallback", "ok_fallback", AS_STRING),
}
_IDS: Final = tuple(f"call_{i}" for i in range(64))
_OPEN_LEN, _CLOSE_LEN = len(TOOL_CALL_OPEN), len(TOOL_CALL_CLOSE)
# A pure cache of immutable results: a tool's compiled check, by name, for the spec it was compiled from.
_checks: dict[str, tuple[ToolSpec, Check]] = {}
_MISSING: Final = object()


def strict_outcome(
    text: str, tools: dict[str, Any], bare_json: bool = True, reasoning_open: bool = False
) -> ParseOutcome | None:
    """The outcome of ``parse_tool_calls(text, tools)`` for a common well-formed shape, else ``None``.

    Args:
        text: the raw output.
        tools: ``{name: ToolSpec}``; an entry that is not a ``ToolSpec`` sends the text to the cascade.
        bare_json: also read a text that is one bare JSON call object or list (``tool_format="auto"``);
            hermes blocks are always read.
        reasoning_open: the prompt opened a ``<think>`` block, so only a text that closes it is read.

    Returns:
        The outcome, with ids ``call_0``, ``call_1``, ..., or ``None``: the cascade reads the text.
    """
    short = len(text) < SHORT
    begin = text.find(TOOL_CALL_OPEN) if short else find_marker(text, TOOL_CALL_OPEN)
    if begin < 0:
        if not bare_json or reasoning_open:
            return None
        first = text.lstrip(_JSON_WS)[:1]
        return _bare_json(text, tools) if first == "{" else _bare_list(text, tools) if first == "[" else None
    lead = text[0]
    if bare_json and not reasoning_open and (lead == "{" or (lead in _JSON_WS and text.lstrip(_JSON_WS)[:1] == "{")):
        return None  # the cascade tries the whole text as one JSON call first
    if len(text) < PLAIN_ANY:
        if "<|" in text or "<｜" in text or "THINK]" in text or "<arg_key>" in text:
            return None
        think = "think>" in text
    elif contains_any(text, _FOREIGN):
        return None
    else:
        think = contains_any(text, _THINK)
    if think:
        return _after_think(text, tools, reasoning_open)
    if reasoning_open:
        return None  # the whole text is reasoning: the cascade decides
    if short and text.find(TOOL_CALL_OPEN, begin + _OPEN_LEN) < 0:
        return _one_block(text, begin, tools)
    found = _blocks(text, begin, 0, len(text), tools, _NO_FLAGS)
    if found is None:
        return None
    return ParseOutcome(found[0], found[2], "", found[1], found[3], _NO_FLAGS)  # a block was read: calls exist


def _one_block(
    text: str, begin: int, tools: dict[str, Any], start: int = 0, reasoning: str = ""
) -> ParseOutcome | None:
    """What :func:`_blocks` reads for ``text[start:]`` with one ``<tool_call>`` (at ``begin``), without its generality.

    One block in prose (after a think block or not) is the most common output; ``reasoning`` is the
    think block's text. ``None`` when the lane does not read the text.
    """
    body = begin + _OPEN_LEN
    close = text.find(TOOL_CALL_CLOSE, body)
    if close < 0:
        return None
    end = close + _CLOSE_LEN
    head, tail = text[start:begin], text[end:]
    if (head and not head.isspace() and _anchor(head)) or (tail and not tail.isspace() and _anchor(tail)):
        return None
    if ((head and not head.isspace()) or (tail and not tail.isspace())) and prose_refuses(text, begin, end, start):
        return None  # the prose around the block quotes, negates or supposes it
    call = _read_object(text[body:close], tools, True)
    if call is None:
        return None
    name, arguments, as_string = call
    if _side_effecting(tools, name) and ((head and not head.isspace()) or (tail and not tail.isspace())):
        return None  # prose around a side-effecting tool's block: the cascade reads its structure
    stage, bucket, repairs = _AS_WRITTEN[as_string]
    return ParseOutcome(
        (
            ToolCall(
                name, arguments, bucket, stage, _NO_FLAGS, repairs, "call_0", HERMES, _stamp(tools, name, arguments)
            ),
        ),
        (head + tail).strip(),
        reasoning,
        (Candidate(text[begin:end], (begin, end), HERMES, stage, bucket, name, arguments, repairs, None, _NO_FLAGS),),
        stage,
        _NO_FLAGS,
    )


def _after_think(text: str, tools: dict[str, Any], reasoning_open: bool) -> ParseOutcome | None:
    """Hermes blocks after one leading ``<think>…</think>`` (or ``…</think>``) block; its calls count alone."""
    short = len(text) < SHORT
    close = find_marker(text, _THINK_CLOSE)
    if close < 0:
        return None
    opener = find_marker(text, _THINK_OPEN, 0, close)
    if opener >= 0 and text[:opener].strip():
        return None
    body = 0 if opener < 0 else opener + len(_THINK_OPEN)
    start = close + len(_THINK_CLOSE)
    if (
        text.count("think>") != (1 if opener < 0 else 2)
        if len(text) < PLAIN_ANY
        else contains_any(text[body:close], _THINK) or contains_any(text[start:], _THINK)
    ):
        return None  # more than one think block, or a stray tag: the reasoning split decides
    reasoning = text[body:close].strip()
    if reasoning_open and not reasoning:
        return None  # a prompt-opened block closed at once leaves no reasoning segment: the cascade decides
    begin = find_marker(text, TOOL_CALL_OPEN, start)
    if short and begin >= 0 and text.find(TOOL_CALL_OPEN, begin + _OPEN_LEN) < 0:
        return _one_block(text, begin, tools, start, reasoning)
    outside = _blocks(text, begin, start, len(text), tools, _NO_FLAGS)
    if outside is None:
        return None
    if outside[0]:
        return ParseOutcome(outside[0], outside[2], reasoning, outside[1], outside[3], _NO_FLAGS)
    if not reasoning:
        return _finish(outside, reasoning, _NO_FLAGS)
    inside = _blocks(text, find_marker(text, TOOL_CALL_OPEN, body, close), body, close, tools, _IN_REASONING)
    if inside is None:
        return None
    return _finish((inside[0], inside[1], outside[2], inside[3]), reasoning, _IN_REASONING)


Blocks = tuple[tuple[ToolCall, ...], tuple[Candidate, ...], str, Stage]
"""What :func:`_blocks` read: the calls, their candidates, the text around them, and the deepest stage."""


def _blocks(
    text: str, begin: int, start: int, stop: int, tools: dict[str, Any], flags: frozenset[str]
) -> Blocks | None:
    """The calls of closed hermes blocks in plain text within ``text[start:stop]``, and the text around them.

    ``begin`` is the first ``<tool_call>`` at or after ``start`` (-1 for none); ``flags`` go on every call.
    """
    if not 0 <= begin < stop:
        around = text[start:stop]
        if around and not around.isspace() and _anchor(around):
            return None
        return (), (), around.strip(), "strict"
    calls: list[ToolCall] = []
    candidates: list[Candidate] = []
    deepest: Stage = "strict"
    gaps: list[str] = []
    pos = start
    while 0 <= begin < stop:
        if begin > pos:
            gap = text[pos:begin]
            if not gap.isspace() and _anchor(gap):
                return None
            gaps.append(gap)
        body = begin + _OPEN_LEN
        close = find_marker(text, TOOL_CALL_CLOSE, body, stop)
        if close < 0 or find_marker(text, TOOL_CALL_OPEN, body, close) >= 0:
            return None
        call = _read_object(text[body:close], tools, True)
        if call is None:
            return None
        name, arguments, as_string = call
        after = find_marker(text, TOOL_CALL_OPEN, close + _CLOSE_LEN, stop)
        if _side_effecting(tools, name) and not _blank(text, pos, begin, close + _CLOSE_LEN, after, stop):
            return None  # prose around a side-effecting tool's block: the cascade reads its structure
        if prose_refuses(text, begin, close + _CLOSE_LEN, pos, after if after >= 0 else stop):
            return None  # the prose around the block quotes, negates or supposes it
        pos = close + _CLOSE_LEN
        count = len(calls)
        ident = _IDS[count] if count < 64 else f"call_{count}"
        stage, bucket, repairs = _AS_WRITTEN[as_string]
        if as_string:
            deepest = "fallback"
        candidates.append(
            Candidate(text[begin:pos], (begin, pos), HERMES, stage, bucket, name, arguments, repairs, None, flags)
        )
        calls.append(
            ToolCall(name, arguments, bucket, stage, flags, repairs, ident, HERMES, _stamp(tools, name, arguments))
        )
        begin = after
    if pos < stop:
        tail = text[pos:stop]
        if not tail.isspace() and _anchor(tail):
            return None
        gaps.append(tail)
    return tuple(calls), tuple(candidates), "".join(gaps).strip(), deepest


def _side_effecting(tools: dict[str, Any], name: str) -> bool:
    """Whether the tool is not declared read-only (``parsing.earned`` takes its calls only where they stand alone)."""
    spec = tools.get(name)
    return not isinstance(spec, ToolSpec) or spec.repair != "bounded"


def _blank(text: str, pos: int, begin: int, end: int, after: int, stop: int) -> bool:
    """Whether only whitespace comes before a block (from ``pos``) and after it (to the next block or ``stop``)."""
    before, rest = text[pos:begin], text[end : after if after >= 0 else stop]
    return (not before or before.isspace()) and (not rest or rest.isspace())


def _finish(found: Blocks, reasoning: str, flags: frozenset[str]) -> ParseOutcome:
    calls, candidates, content, deepest = found
    if not calls:
        return ParseOutcome((), content, reasoning, (), "none", _NO_CALL)
    return ParseOutcome(calls, content, reasoning, candidates, deepest, flags)


def _bare_json(text: str, tools: dict[str, Any]) -> ParseOutcome | None:
    """One bare JSON call object and nothing else, as Llama 3 writes it."""
    first = len(text) - len(text.lstrip(_JSON_WS))
    if text[first : first + 1] != "{":
        return None
    if contains_any(text, _TOKENS):
        return None
    call = _read_object(text, tools, False)
    if call is None:
        return None
    name, arguments, as_string = call
    stage, bucket, repairs = _AS_WRITTEN[as_string]
    end = len(text.rstrip())
    return ParseOutcome(
        (
            ToolCall(
                name,
                arguments,
                bucket,
                stage,
                _NO_FLAGS,
                repairs,
                "call_0",
                LLAMA3_JSON,
                _stamp(tools, name, arguments),
            ),
        ),
        "",
        "",
        (
            Candidate(
                text[first:end], (first, end), LLAMA3_JSON, stage, bucket, name, arguments, repairs, None, _NO_FLAGS
            ),
        ),
        stage,
        _NO_FLAGS,
    )


def _bare_list(text: str, tools: dict[str, Any]) -> ParseOutcome | None:
    """A bare JSON list of ``{"name", "arguments"}`` objects and nothing else, which the fallback stage reads.

    Each call's span is its object plus the separator before it; the first also takes the opening
    bracket and the last the closing one, so no part of the list is left as content.
    """
    if "<" in text or "`" in text or contains_any(text, _BRACKET_THINK):
        return None  # tags and fences the fallback stage would grow the calls over
    opening = len(text) - len(text.lstrip(_JSON_WS))
    pos = skip_json_space(text, opening + 1)
    if pos - opening > _LIST_GAP_MAX:
        return None
    calls: list[ToolCall] = []
    candidates: list[Candidate] = []
    start = opening
    while True:
        if text[pos : pos + 1] != "{":
            return None
        try:
            obj, end = scan_json(text, pos)
        except (ValueError, StopIteration, RecursionError):
            return None
        call = _list_item(obj, tools)
        if call is None:
            return None
        after = skip_json_space(text, end)
        mark = text[after : after + 1]
        last = mark == "]" and not text[after + 1 :].strip(_JSON_WS)
        if mark != "," and not last:
            return None
        stop = after + 1 if last else end
        name, arguments = call
        ident = _IDS[len(calls)] if len(calls) < 64 else f"call_{len(calls)}"
        candidates.append(
            Candidate(
                text[start:stop], (start, stop), "json", "fallback", "ok_fallback", name, arguments, (), None, _NO_FLAGS
            )
        )
        calls.append(
            ToolCall(
                name, arguments, "ok_fallback", "fallback", _NO_FLAGS, (), ident, "json", _stamp(tools, name, arguments)
            )
        )
        if last:
            return ParseOutcome(tuple(calls), "", "", tuple(candidates), "fallback", _NO_FLAGS)
        start, pos = end, skip_json_space(text, after + 1)


def _list_item(obj: Any, tools: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The name and arguments of one list item written ``{"name": ..., "arguments"|"parameters": {...}}``."""
    if type(obj) is not dict or len(obj) != 2:
        return None
    name = obj.get("name")
    arguments = obj["arguments"] if "arguments" in obj else obj.get("parameters")
    if type(name) is not str or type(arguments) is not dict or is_schema_echo(arguments):
        return None
    check = _checks.get(name)
    if check is None or check[0] is not tools.get(name):
        check = _check_for(name, tools.get(name))
    if check is None or is_placeholder_args(arguments):
        return None
    try:
        return (name, arguments) if check[1](arguments) else None
    except RecursionError:
        return None


def _read_object(payload: str, tools: dict[str, Any], hermes: bool) -> tuple[str, dict[str, Any], bool] | None:
    """The name, arguments and string flag of one strict JSON call object the cascade accepts as written.

    ``hermes``: the payload is a ``<tool_call>`` body (else a whole bare Llama 3 output), read as
    :mod:`tooldispatch.parsing.formats.hermes` reads it.
    """
    value = payload.strip(_JSON_WS)  # what ``json.loads`` skips around the value
    if not value.startswith("{"):
        return None
    try:
        obj, end = scan_json(value, 0)  # an object, since the value starts with "{"
    except (ValueError, StopIteration, RecursionError):
        obj, end = None, -1
    if end != len(value) or type(obj) is not dict:
        return None
    return _call_of(obj, payload, tools, hermes)


def _call_of(
    obj: dict[str, Any], payload: str, tools: dict[str, Any], hermes: bool
) -> tuple[str, dict[str, Any], bool] | None:
    """What :func:`_read_object` returns for ``payload``, decoded to ``obj``."""
    name = obj.get("name")
    arguments = obj.get("arguments", _MISSING)
    if len(obj) != 2 or arguments is _MISSING:
        # Any other key set: what the formats' readers do with "function", "parameters" and "args".
        if "function" in obj or (hermes and ("parameters" in obj or "args" in obj)):
            return None
        if arguments is _MISSING:
            arguments = None if hermes else obj.get("parameters")
    as_string = type(arguments) is str
    if as_string:
        arguments = _decode_string(arguments)
    if type(arguments) is not dict or type(name) is not str:
        return None
    spec = tools.get(name)
    check = _checks.get(name)
    if check is None or check[0] is not spec:
        check = _check_for(name, spec)
        if check is None:
            return None
    if "properties" in arguments and is_schema_echo(arguments):
        return None  # an echoed schema: the cascade drops it
    if (
        hermes
        and len(payload) <= _PLACEHOLDER_BODY_MAX
        and ("<" in payload or "{..." in payload)
        and is_placeholder(None, payload)
    ):
        return None
    try:
        if not check[1](arguments):
            return None
    except RecursionError:
        return None
    return name, arguments, as_string


def _stamp(tools: dict[str, Any], name: str, arguments: dict[str, Any]) -> Checked | None:
    """The stamp of a call the lane read and checked against its declared tool (``ToolCall.checked``)."""
    return stamp(tools[name].parameters, arguments)


def _check_for(name: str, spec: Any) -> tuple[ToolSpec, Check] | None:
    """The compiled check of a declared tool the lane may read calls of, cached by name for that spec."""
    if type(spec) is not ToolSpec or spec.name != name or is_placeholder(name) or name != name.strip():
        return None
    try:
        check = fast_check(spec.parameters)
    except RecursionError:
        return None
    if check is None:
        return None
    if len(_checks) >= 1024:
        _checks.clear()
    entry = _checks[name] = (spec, check)
    return entry


def _decode_string(text: str) -> Any:
    """Arguments written as a JSON string: the object it holds when it is strict JSON, else ``None``."""
    value = text.strip(_JSON_WS)
    if value[:1] != "{":
        return None
    try:
        obj, end = scan_json(value, 0)
    except (ValueError, StopIteration, RecursionError):
        return None
    return obj if end == len(value) else None
