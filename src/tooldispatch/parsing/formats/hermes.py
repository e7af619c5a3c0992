"""Hermes / Qwen 2.5-3 tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from tooldispatch.parsing._markers import contains_any
from tooldispatch.parsing._markers import find as find_marker
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import glm
from tooldispatch.parsing.formats._common import (
    FIX_FENCE,
    FIX_UNCLOSED,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    Block,
    calls_from_payload,
    is_placeholder,
    is_schema_echo,
    iter_blocks,
    strip_fence,
    tool_call_body_kind,
)
from tooldispatch.parsing.lenient import NOT_JSON, strict_value

FORMAT: Final = "hermes"
MARKERS: Final[tuple[str, ...]] = (TOOL_CALL_OPEN,)

Known = Mapping[str, Sequence[RawCall]]
"""Closed blocks already read: a block's text (``<tool_call>`` to ``</tool_call>``, a body this format owns,
see ``tool_call_body_kind``) → the calls :func:`read_block` reads in it when it stands at offset 0."""


def find(text: str, known: Known | None = None) -> list[RawCall]:
    """Find every ``<tool_call>`` block holding JSON; each block is decoded on its own (or taken from ``known``)."""
    out: list[RawCall] = []
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        taken = _known_calls(text, block, known) if known is not None else None
        if taken is not None:
            out.extend(taken)
        elif tool_call_body_kind(text, block.body_start, block.body_end) == FORMAT:
            out.extend(read_block(text, block))
    return out


def read_block(text: str, block: Block) -> list[RawCall]:
    """Read the calls of one ``<tool_call>`` block whose body is JSON."""
    body = text[block.body_start : block.body_end]
    if is_placeholder(None, body):
        return []
    payload, fenced = strip_fence(body)
    fixes = ((FIX_FENCE,) if fenced else ()) + (() if block.closed else (FIX_UNCLOSED,))
    calls = calls_from_payload(text, (block.start, block.end), FORMAT, payload, fixes=fixes, truncated=block.at_end)
    return [c for c in calls if not is_placeholder(c.name)]


def _known_calls(text: str, block: Block, known: Known) -> list[RawCall] | None:
    """The calls of a closed block whose text is in ``known``, moved to its offset; ``None`` for another block."""
    if not block.closed or block.at_end:
        return None
    calls = known.get(text[block.start : block.end])
    if calls is None:
        return None
    start = block.start
    return [
        RawCall(
            (start + c.span[0], start + c.span[1]), c.raw, c.format, c.stage, c.name, c.arguments,
            c.arguments_text, c.decode_error, c.truncated, c.lenient, c.flags,
        )
        for c in calls
    ]  # fmt: skip


def find_tool_call_tags(text: str, known: Known | None = None) -> list[RawCall]:
    """Read every ``<tool_call>`` block once, each by the format that owns its body (hermes or GLM).

    ``known``: blocks already read (see :data:`Known`), taken as they are instead of decoded again.
    """
    out: list[RawCall] = []
    glm_finders: glm.Finders | None = None
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        taken = _known_calls(text, block, known) if known is not None else None
        if taken is not None:
            out.extend(taken)
            continue
        kind = tool_call_body_kind(text, block.body_start, block.body_end)
        if kind == FORMAT:
            out.extend(read_block(text, block))
        elif kind == glm.FORMAT:
            glm_finders = glm_finders or glm.Finders.over(text)
            call = glm.read_block(text, block, glm_finders)
            if call is not None:
                out.append(call)
    return out


# Characters that could start something another stage reads: a tag or marker, a JSON object or list, a
# python call, a fence. Text outside the blocks that holds none of them cannot hold a call.
ANCHORS: Final = re.compile(r"[{(<\[`]")
# Markers that make the reasoning split or another format's reading differ from hermes blocks alone.
_FOREIGN: Final = ("<|", "<｜", "THINK]", "<arg_key>")
_MISSING: Final = object()


def find_only_tool_call_tags(text: str, start: int = 0, end: int | None = None) -> tuple[list[RawCall], str] | None:
    """Read text made only of closed hermes ``<tool_call>`` blocks and plain text, or return ``None``.

    This is the common case, read without the generic cascade: the calls of every block (as
    :func:`find` reads them) and the content (the text outside the blocks, stripped), both within
    ``text[start:end]``. It answers only when nothing else could find a call there: every block is
    closed and holds JSON, no harmony, DeepSeek, ``[THINK]`` or GLM marker appears anywhere in ``text``,
    and the text between blocks has no character that could anchor a tag, JSON, a python call or a
    fence (so plain prose with no block at all answers too, with no calls). Otherwise ``None``: run
    the cascade. ``<think>`` tags are the caller's to rule out or split off.
    """
    shape = tool_call_blocks(text, start, end)
    if shape is None:
        return None
    blocks, content = shape
    # The shape is settled before any body is decoded, so a text that is not this shape costs only the scan.
    calls: list[RawCall] = []
    for begin, body, close, stop in blocks:
        found = _read_json_body(text, begin, stop, text[body:close])
        if found is None:
            return None
        calls.extend(found)
    return calls, content


def tool_call_blocks(
    text: str, start: int = 0, end: int | None = None
) -> tuple[list[tuple[int, int, int, int]], str] | None:
    """The shape :func:`find_only_tool_call_tags` reads, before any block body is decoded, else ``None``.

    Returns:
        Each closed block's start, body start, body end and end, and the content (the text outside the
        blocks, joined and stripped); ``None`` when ``text[start:end]`` is not closed ``<tool_call>``
        blocks in plain text (see :func:`find_only_tool_call_tags`).
    """
    if contains_any(text, _FOREIGN):
        return None
    stop = len(text) if end is None else end
    if start == 0 and stop == len(text) and TOOL_CALL_OPEN not in text and ANCHORS.search(text):
        return None  # no block, and something another stage reads
    blocks: list[tuple[int, int, int, int]] = []
    outside: list[str] = []
    pos = start
    open_len, close_len = len(TOOL_CALL_OPEN), len(TOOL_CALL_CLOSE)
    while True:
        begin = find_marker(text, TOOL_CALL_OPEN, pos, stop)
        if begin < 0:
            break
        gap = text[pos:begin]
        if gap and not gap.isspace() and ANCHORS.search(gap):
            return None
        outside.append(gap)
        body = begin + open_len
        close = find_marker(text, TOOL_CALL_CLOSE, body, stop)
        if close < 0 or find_marker(text, TOOL_CALL_OPEN, body, close) >= 0:
            return None
        blocks.append((begin, body, close, close + close_len))
        pos = close + close_len
    tail = text[pos:stop]
    if tail and not tail.isspace() and ANCHORS.search(tail):
        return None
    outside.append(tail)
    return blocks, "".join(outside).strip()


def _read_json_body(text: str, begin: int, end: int, payload: str) -> list[RawCall] | None:
    """The calls of one block whose body is a JSON object, as :func:`read_block` reads them; else ``None``."""
    if not payload.lstrip().startswith("{") or is_placeholder(None, payload):
        return None
    obj = strict_value(payload)
    if obj is NOT_JSON:
        obj = _MISSING
    if type(obj) is dict and "function" not in obj:
        name, args = obj.get("name"), obj.get("arguments", _MISSING)
        if type(name) is str and type(args) is dict and "parameters" not in obj and "args" not in obj:
            found = [RawCall((begin, end), text[begin:end], FORMAT, "strict", name.strip(), args, payload)]
        else:
            found = calls_from_payload(text, (begin, end), FORMAT, payload)
    else:
        found = calls_from_payload(text, (begin, end), FORMAT, payload, strict_failed=obj is _MISSING)
    for call in found:
        if is_placeholder(call.name) or is_schema_echo(call.arguments):
            return None
    return found
