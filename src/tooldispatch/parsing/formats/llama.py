"""Llama tool calls.

* Llama 3.x JSON: ``{"name": …, "parameters": {…}}`` (``arguments`` also accepted) as the whole
  output, or after ``<|python_tag|>``; several calls separated by ``;``. After ``<|python_tag|>`` a
  built-in tool call such as ``brave_search.call(query="…")`` is read as Python.
* Llama 4: ``<|python_start|>[get_weather(city="Paris")]<|python_end|>`` (Python call list, or JSON).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import pythonic
from tooldispatch.parsing.formats._common import (
    FIX_UNCLOSED,
    balanced_end,
    calls_from_payload,
    is_placeholder,
    iter_blocks,
    looks_like_call,
    make_call,
    match_name,
    raw_decode_at,
    skip_ws,
    split_call_object,
)
from tooldispatch.parsing.formats._format import JSON_START, CallGrammar, CallList, Format, PromptFormat
from tooldispatch.parsing.formats._prompt import dumps, tool_lines, tool_response
from tooldispatch.parsing.lenient import NOT_JSON, strict_value
from tooldispatch.toolspec import ToolSpec

FORMAT_LLAMA3: Final = "llama3_json"
FORMAT_LLAMA4: Final = "llama4"
PYTHON_TAG: Final = "<|python_tag|>"
PY_START, PY_END = "<|python_start|>", "<|python_end|>"
MARKERS_LLAMA3: Final[tuple[str, ...]] = (PYTHON_TAG, JSON_START)
MARKERS_LLAMA4: Final[tuple[str, ...]] = (PY_START,)
_END_TOKENS: Final = ("<|eom_id|>", "<|eot_id|>")


def find_llama3(text: str) -> list[RawCall]:
    """Find Llama 3.x JSON calls: after ``<|python_tag|>``, or as the whole output."""
    tag = text.find(PYTHON_TAG)
    if tag >= 0:
        out: list[RawCall] = []
        while tag >= 0:
            nxt = text.find(PYTHON_TAG, tag + len(PYTHON_TAG))
            limit = len(text) if nxt < 0 else nxt
            calls = _calls_after(text, tag, tag + len(PYTHON_TAG), require_name=False, limit=limit)
            out.extend(calls)
            after = calls[-1].span[1] if calls else tag + len(PYTHON_TAG)
            tag = text.find(PYTHON_TAG, max(after, tag + len(PYTHON_TAG)))
        return out
    first = skip_ws(text, 0)
    if not text.startswith("{", first):
        return []
    if "<tool_call>" in text and raw_decode_at(text, first) is None:
        # A brace that never closes before a hermes block: the block is the call, not a cut-off object.
        return []
    calls = _calls_after(text, first, first, require_name=True, limit=len(text))
    # The whole output must be calls; JSON followed by prose is left to the fallback stage.
    if calls and skip_ws(text, calls[-1].span[1]) < len(text):
        return []
    return calls


def _calls_after(text: str, start: int, pos: int, *, require_name: bool, limit: int) -> list[RawCall]:
    """Read JSON calls from ``pos`` up to ``limit`` (the next ``<|python_tag|>`` or the end)."""
    out: list[RawCall] = []
    n = limit
    at_end = limit == len(text)
    i = skip_ws(text, pos, n)
    if i < n and text[i] not in "{[":
        return _python_after(text, start, i, limit)
    while i < n and text[i] in "{[":
        span_start = start if not out else out[-1].span[1]
        done = raw_decode_at(text, i, n)
        if done is not None:
            value, end = done
            items = value if isinstance(value, list) else [value]
            for item in items:
                if require_name and not looks_like_call(item):
                    return []
                name, args, fixes, error = split_call_object(item)
                out.append(
                    make_call(
                        text,
                        (span_start, end),
                        FORMAT_LLAMA3,
                        name,
                        arguments=args,
                        arguments_text=text[i:end],
                        decode_error=error,
                        fixes=fixes,
                    )
                )
        else:
            end = balanced_end(text, i, limit=n)
            cut = end < 0
            end = n if cut else end
            # An object or list that did not decode whole, or never closed, is not strict JSON either way.
            calls = calls_from_payload(
                text, (span_start, end), FORMAT_LLAMA3, text[i:end], truncated=cut and at_end, strict_failed=True
            )
            if require_name and any(c.name is None for c in calls):
                return []
            out.extend(calls)
        i = skip_ws(text, end, n)
        if i < n and text[i] == ";":
            i = skip_ws(text, i + 1, n)
        for token in _END_TOKENS:
            if text.startswith(token, i):
                out[-1] = _with_end(text, out[-1], i + len(token))
                i = skip_ws(text, i + len(token), n)
    return [c for c in out if not is_placeholder(c.name)]


def _python_after(text: str, start: int, i: int, limit: int) -> list[RawCall]:
    """``<|python_tag|>brave_search.call(query="x")``: a built-in tool call written as Python."""
    paren = text.find("(", i, min(limit, i + 200))
    if paren < 0:
        return []
    end = balanced_end(text, paren, python=True, limit=limit)
    if end < 0:
        name = text[i:paren].strip()
        cut = limit == len(text)
        return [make_call(text, (start, limit), FORMAT_LLAMA3, name, decode_error="call not closed", truncated=cut)]
    calls = pythonic.parse_python_calls(text[i:end])
    if not calls:
        return []
    stop = end
    for token in _END_TOKENS:
        t = skip_ws(text, stop)
        if text.startswith(token, t):
            stop = t + len(token)
    return [
        make_call(text, (start, stop), FORMAT_LLAMA3, c.name, arguments=c.arguments, decode_error=c.error)
        for c in calls
    ]


def _with_end(text: str, call: RawCall, end: int) -> RawCall:
    return make_call(
        text,
        (call.span[0], end),
        call.format,
        call.name,
        arguments=call.arguments,
        arguments_text=call.arguments_text,
        decode_error=call.decode_error,
        fixes=call.lenient,
        truncated=call.truncated,
    )


def find_llama4(text: str) -> list[RawCall]:
    """Find ``<|python_start|>…<|python_end|>`` blocks holding a Python call list or JSON."""
    out: list[RawCall] = []
    for block in iter_blocks(text, PY_START, PY_END):
        body = text[block.body_start : block.body_end]
        span = (block.start, block.end)
        fixes: tuple[str, ...] = () if block.closed else (FIX_UNCLOSED,)
        first = skip_ws(text, block.body_start, block.body_end)
        if text.startswith("{", first) or text.startswith("[{", first) or text.startswith("[ {", first):
            out.extend(calls_from_payload(text, span, FORMAT_LLAMA4, body, fixes=fixes, truncated=block.at_end))
            continue
        calls = pythonic.parse_python_calls(body)
        if calls is None:
            name = match_name(text, skip_ws(text, first + 1 if text.startswith("[", first) else first))
            out.append(
                make_call(
                    text,
                    span,
                    FORMAT_LLAMA4,
                    name,
                    arguments_text=body,
                    decode_error="not a Python call list",
                    fixes=fixes,
                    truncated=block.at_end,
                )
            )
            continue
        out.extend(
            make_call(
                text,
                span,
                FORMAT_LLAMA4,
                c.name,
                arguments=c.arguments,
                decode_error=c.error,
                fixes=fixes,
                truncated=block.at_end,
            )
            for c in calls
        )
    return out


def read_whole_json_call(text: str) -> list[RawCall] | None:
    """Read an output that is exactly one JSON call object, as :func:`find_llama3` reads it; else ``None``.

    One ``json.loads`` of the whole text settles the shape, so nothing is decoded twice.
    """
    value = strict_value(text)
    if value is NOT_JSON:
        return None
    if not isinstance(value, dict) or not looks_like_call(value):
        return None
    first = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    name, args, fixes, error = split_call_object(value)
    call = make_call(
        text,
        (first, end),
        FORMAT_LLAMA3,
        name,
        arguments=args,
        arguments_text=text[first:end],
        decode_error=error,
        fixes=fixes,
    )
    return [] if is_placeholder(call.name) else [call]


def _json_system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below. To call one, respond with only a JSON object of the form "
        '{"name": function name, "parameters": object of argument names and values}, for example\n'
        '{"name": "function_name", "parameters": {"argument_name": "value"}}\n'
        "Do not use variables. When no call is needed, answer in plain text.\n\n"
        f"{tool_lines(tools)}"
    )


def _json_calls(calls: CallList) -> str:
    return "; ".join(dumps({"name": n, "parameters": dict(a)}) for n, a in calls)


DECLARATION_LLAMA4: Final[Format] = Format(
    name=FORMAT_LLAMA4,
    find=find_llama4,
    markers=MARKERS_LLAMA4,
    stream_openers=(("python_start", r"<\|python_start\|>"),),
    stream_closers=(("python_start", re.escape(PY_END)),),
    other_names=("llama4_pythonic",),
)
"""Llama 4: a call list between ``<|python_start|>`` and ``<|python_end|>``."""

DECLARATION_LLAMA3: Final[Format] = Format(
    name=FORMAT_LLAMA3,
    find=find_llama3,
    markers=MARKERS_LLAMA3,
    stream_openers=(("open_ended", r"<\|python_tag\|>"),),
    other_names=("llama3",),
    prompts=(
        PromptFormat(
            "json",
            _json_system,
            _json_calls,
            tool_response,
            CallGrammar("json", "", "", many=False, start="{", lazy_shape="bare_json"),
            arguments_key="parameters",
            families=("llama",),
        ),
    ),
)
"""Llama 3 JSON: ``{"name": …, "parameters": {…}}`` calls, whole or after ``<|python_tag|>``."""
