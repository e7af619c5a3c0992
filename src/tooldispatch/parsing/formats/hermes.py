"""Hermes / Qwen 2.5-3 tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

from typing import Final

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
    iter_blocks,
    strip_fence,
    tool_call_body_kind,
)

FORMAT: Final = "hermes"
MARKERS: Final[tuple[str, ...]] = (TOOL_CALL_OPEN,)


def find(text: str) -> list[RawCall]:
    """Find every ``<tool_call>`` block holding JSON; each block is decoded on its own."""
    out: list[RawCall] = []
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        if tool_call_body_kind(text, block.body_start, block.body_end) == FORMAT:
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


def find_tool_call_tags(text: str) -> list[RawCall]:
    """Read every ``<tool_call>`` block once, each by the format that owns its body (hermes or GLM)."""
    out: list[RawCall] = []
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        kind = tool_call_body_kind(text, block.body_start, block.body_end)
        if kind == FORMAT:
            out.extend(read_block(text, block))
        elif kind == glm.FORMAT:
            call = glm.read_block(text, block)
            if call is not None:
                out.append(call)
    return out
