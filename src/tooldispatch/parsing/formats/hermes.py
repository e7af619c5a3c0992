"""Hermes / Qwen 2.5-3 tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_FENCE,
    FIX_UNCLOSED,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    calls_from_payload,
    is_placeholder,
    iter_blocks,
    strip_fence,
    tool_call_body_kind,
)

FORMAT = "hermes"
MARKERS: tuple[str, ...] = (TOOL_CALL_OPEN,)


def find(text: str) -> list[RawCall]:
    """Find every ``<tool_call>`` block holding JSON; each block is decoded on its own."""
    out: list[RawCall] = []
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        if tool_call_body_kind(text, block.body_start, block.body_end) != FORMAT:
            continue
        body = text[block.body_start : block.body_end]
        if not body.strip() or is_placeholder(None, body):
            continue
        payload, fenced = strip_fence(body)
        fixes = ((FIX_FENCE,) if fenced else ()) + (() if block.closed else (FIX_UNCLOSED,))
        calls = calls_from_payload(text, (block.start, block.end), FORMAT, payload, fixes=fixes, truncated=block.at_end)
        out.extend(c for c in calls if not is_placeholder(c.name))
    return out
