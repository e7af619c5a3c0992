"""Kimi K2 tool-call sections.

Kimi K2's chat template (and vLLM's ``kimi_k2`` tool parser) writes::

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>
    <|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>
    <|tool_calls_section_end|>

The call id is ``functions.NAME:IDX``; the name is what stands between ``functions.`` and the last colon.
The section tokens belong to the calls' spans. Calls whose ``<|tool_call_end|>`` never came end at the next
call or the section's end (and are cut off when the output ends inside them).
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import FIX_UNCLOSED, call_from_named_body, is_placeholder
from tooldispatch.parsing.formats._format import Format

FORMAT: Final = "kimi_k2"
MARKERS: Final[tuple[str, ...]] = ("<|tool",)

_SECTION_BEGIN: Final = "<|tool_calls_section_begin|>"
_SECTION_END: Final = "<|tool_calls_section_end|>"
_CALL_BEGIN: Final = "<|tool_call_begin|>"
_ARGUMENT_BEGIN: Final = "<|tool_call_argument_begin|>"
_CALL_END: Final = "<|tool_call_end|>"
# The call id: an optional ``functions.`` namespace, the name, an optional ``:index``. Bounded.
_CALL_ID: Final = re.compile(r"\s{0,4}(?:functions\.)?([A-Za-z_][\w.\-]{0,127}?)(?::\d{1,6})?\s{0,4}\Z")


def find(text: str) -> list[RawCall]:
    """Find every ``<|tool_call_begin|>ID<|tool_call_argument_begin|>ARGS<|tool_call_end|>`` call."""
    if _ARGUMENT_BEGIN not in text:
        return []
    out: list[RawCall] = []
    pos = text.find(_CALL_BEGIN)
    while pos >= 0:
        head = pos + len(_CALL_BEGIN)
        nxt = text.find(_CALL_BEGIN, head)
        limit = nxt if nxt >= 0 else len(text)
        section_end = text.find(_SECTION_END, head, limit)
        if section_end >= 0:
            limit = section_end
        arg = text.find(_ARGUMENT_BEGIN, head, limit)
        if arg < 0:
            pos = nxt
            continue
        close = text.find(_CALL_END, arg, limit)
        body_end = close if close >= 0 else limit
        end = close + len(_CALL_END) if close >= 0 else limit
        ident = _CALL_ID.match(text, head, arg)
        name = ident.group(1) if ident is not None else None
        if is_placeholder(name):
            pos = nxt
            continue
        start = _section_start(text, pos)
        end = _section_end(text, end)
        fixes: tuple[str, ...] = () if close >= 0 else (FIX_UNCLOSED,)
        at_end = close < 0 and limit == len(text)
        body = text[arg + len(_ARGUMENT_BEGIN) : body_end]
        out.append(call_from_named_body(text, (start, end), FORMAT, name, body, fixes=fixes, truncated=at_end))
        pos = nxt
    return out


def _section_start(text: str, begin: int) -> int:
    """The start of a section token right before the call (whitespace between), else the call's own start."""
    lo = max(0, begin - len(_SECTION_BEGIN) - 16)
    before = text[lo:begin].rstrip()
    return lo + len(before) - len(_SECTION_BEGIN) if before.endswith(_SECTION_BEGIN) else begin


def _section_end(text: str, end: int) -> int:
    """The end of a section token right after the call (whitespace between), else the call's own end."""
    window = text[end : end + len(_SECTION_END) + 16]
    after = end + len(window) - len(window.lstrip())
    return after + len(_SECTION_END) if text.startswith(_SECTION_END, after) else end


DECLARATION: Final[Format] = Format(name=FORMAT, find=find, markers=MARKERS, other_names=("kimi",))
"""Kimi K2: tool-call sections (held by the stream parser as ``<|…|>`` tags)."""
