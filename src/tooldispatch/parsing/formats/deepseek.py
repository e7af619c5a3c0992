"""DeepSeek V3 / V3.1 / R1 tool-call tokens.

V3 and R1::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>
    <｜tool▁calls▁end｜>

The tokens are also accepted in ASCII spellings that quantized or re-tokenized models produce:
``|`` for ``｜`` and ``_`` or a space for ``▁`` (``<|tool_call_begin|>``).
"""

from __future__ import annotations

import bisect
import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_UNCLOSED,
    call_from_named_body,
    is_placeholder,
    make_call,
    strip_fence,
)
from tooldispatch.parsing.formats._format import Format

FORMAT_V3: Final = "deepseek_v3"
FORMAT_V31: Final = "deepseek_v31"
MARKERS: Final[tuple[str, ...]] = ("<|tool", "<｜tool")


# The five tokens (words joined by ``▁``, ``_`` or a space, spaces allowed inside the bars) in one pattern,
# told apart by group: tokens cannot overlap (each is one ``<…>`` with no ``<`` inside), so one pass finds
# what five would. Linear: literal words, one-character classes and bounded optional spaces, so each start
# position costs a bounded time (the standard ``re`` needs no time limit for it).
_ANY_TOKEN: Final = re.compile(
    r"<[|｜]\s{0,2}tool[▁_ ](?:(calls[▁_ ]begin)|(calls[▁_ ]end)|(call[▁_ ]begin)|(call[▁_ ]end)|(sep))\s{0,2}[|｜]>"
)


def find(text: str) -> list[RawCall]:
    """Find every ``tool▁call▁begin … tool▁call▁end`` call."""
    found: list[list[tuple[int, int]]] = [[], [], [], [], [], []]
    for m in _ANY_TOKEN.finditer(text):
        found[m.lastindex or 0].append((m.start(), m.end()))
    outer_begins, outer_ends, begins, ends, seps = found[1], found[2], found[3], found[4], found[5]
    if not begins:
        return []
    end_starts = [s for s, _ in ends]
    sep_starts = [s for s, _ in seps]
    outer_end_starts = [s for s, _ in outer_ends]
    outer_begin_ends = [e for _, e in outer_begins]
    out: list[RawCall] = []
    n = len(text)
    for idx, (b_start, b_end) in enumerate(begins):
        limit = begins[idx + 1][0] if idx + 1 < len(begins) else n
        o_i = bisect.bisect_left(outer_end_starts, b_end)
        if o_i < len(outer_ends) and outer_ends[o_i][0] < limit:
            limit = outer_ends[o_i][0]
        e_i = bisect.bisect_left(end_starts, b_end)
        closed = e_i < len(ends) and ends[e_i][0] < limit
        body_end = ends[e_i][0] if closed else limit
        end = ends[e_i][1] if closed else limit
        at_end = not closed and limit == n
        s_i = bisect.bisect_left(sep_starts, b_end)
        has_sep = s_i < len(seps) and seps[s_i][0] < body_end
        if not has_sep and "argument_begin" in text[b_end:body_end]:
            continue  # a Kimi K2 call (``<|tool_call_argument_begin|>``): its finder reads it
        if not has_sep:
            out.append(
                make_call(
                    text,
                    (b_start, end),
                    FORMAT_V31,
                    text[b_end:body_end].strip() or None,
                    decode_error="no tool separator token",
                    truncated=at_end,
                )
            )
            continue
        head = text[b_end : seps[s_i][0]].strip()
        tail = text[seps[s_i][1] : body_end]
        fmt, name, payload = _read(head, tail)
        if is_placeholder(name):
            continue
        span = _extend((b_start, end), text, outer_begins, outer_ends, outer_begin_ends, outer_end_starts)
        fixes: tuple[str, ...] = () if closed else (FIX_UNCLOSED,)
        out.append(_call(text, span, fmt, name, payload, fixes, at_end))
    return out


def _read(head: str, tail: str) -> tuple[str, str | None, str]:
    """Tell V3 (``function<sep>name\\n```json…```) from V3.1 (``name<sep>{…}``)."""
    stripped = tail.lstrip()
    if head in ("function", "") and stripped[:1] not in ("{", "["):
        line_end = stripped.find("\n")
        fence = stripped.find("```")
        cut = min(i for i in (line_end, fence, len(stripped)) if i >= 0)
        name = stripped[:cut].strip() or None
        return FORMAT_V3, name, stripped[cut:]
    return FORMAT_V31, head or None, tail


def _call(
    text: str, span: tuple[int, int], fmt: str, name: str | None, payload: str, fixes: tuple[str, ...], at_end: bool
) -> RawCall:
    body, fenced = strip_fence(payload)
    if not fenced and payload.lstrip().startswith("```"):
        # An opened fence that the output never closed.
        body = payload.lstrip()[3:]
        body = body[4:] if body.startswith("json") else body
    return call_from_named_body(text, span, fmt, name, body, fixes=fixes, truncated=at_end)


def _extend(
    span: tuple[int, int],
    text: str,
    outer_begins: list[tuple[int, int]],
    outer_ends: list[tuple[int, int]],
    begin_ends: list[int],
    end_starts: list[int],
) -> tuple[int, int]:
    start, end = span
    i = bisect.bisect_right(begin_ends, start) - 1
    if i >= 0 and start - outer_begins[i][1] <= 256 and not text[outer_begins[i][1] : start].strip():
        start = outer_begins[i][0]
    j = bisect.bisect_left(end_starts, end)
    if j < len(outer_ends) and outer_ends[j][0] - end <= 256 and not text[end : outer_ends[j][0]].strip():
        end = outer_ends[j][1]
    return start, end


DECLARATION: Final[Format] = Format(
    name="deepseek",
    find=find,
    markers=MARKERS,
    stream_openers=(("deepseek", r"<[｜|]tool[▁_ ]calls[▁_ ]begin[｜|]>"),),
    stream_closers=(("deepseek", r"<[｜|]tool[▁_ ]calls[▁_ ]end[｜|]>"),),
    other_names=(FORMAT_V3, FORMAT_V31),
)
"""DeepSeek V3 / V3.1 / R1: tool-call tokens (each call reports which version's spelling it used)."""
