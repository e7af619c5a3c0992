"""GLM-4.5/4.6/4.7 tool calls: ``<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>``.

Values are strings as written; objects and arrays are JSON-decoded, and everything else is left for
schema-guided repair to convert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    Block,
    NextFinder,
    cut_in_opener,
    is_placeholder,
    iter_blocks,
    make_call,
    tool_call_body_kind,
    xml_value,
)

FORMAT: Final = "glm"
MARKERS: Final[tuple[str, ...]] = (TOOL_CALL_OPEN,)

_KEY_OPEN, _KEY_CLOSE = "<arg_key>", "</arg_key>"
_VALUE_OPEN, _VALUE_CLOSE = "<arg_value>", "</arg_value>"


def find(text: str) -> list[RawCall]:
    """Find every GLM ``<tool_call>`` block."""
    out: list[RawCall] = []
    finders = Finders.over(text)
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        if tool_call_body_kind(text, block.body_start, block.body_end) == FORMAT:
            call = read_block(text, block, finders)
            if call is not None:
                out.append(call)
    return out


@dataclass(frozen=True, slots=True)
class Finders:
    """Forward searches for the four pair tags, shared by every block of one text."""

    key_open: NextFinder
    key_close: NextFinder
    value_open: NextFinder
    value_close: NextFinder

    @classmethod
    def over(cls, text: str) -> Finders:
        """Make the searches for ``text``."""
        return cls(
            NextFinder(text, _KEY_OPEN),
            NextFinder(text, _KEY_CLOSE),
            NextFinder(text, _VALUE_OPEN),
            NextFinder(text, _VALUE_CLOSE),
        )


def read_block(text: str, block: Block, finders: Finders) -> RawCall | None:
    """Read one GLM ``<tool_call>`` block (``None`` for a placeholder name)."""
    first_key = finders.key_open.find(block.body_start, block.body_end)
    head_end = block.body_end if first_key < 0 else first_key
    name = text[block.body_start : head_end].strip()
    if not name or is_placeholder(name):
        return None
    args, cut = _pairs(text, head_end, block.body_end, finders)
    fixes: tuple[str, ...] = () if block.closed else (FIX_UNCLOSED,)
    if cut:
        fixes = (*fixes, FIX_INCOMPLETE)
    return make_call(
        text,
        (block.start, block.end),
        FORMAT,
        name,
        arguments=args,
        arguments_text=text[head_end : block.body_end],
        fixes=fixes,
        truncated=block.at_end,
    )


def _pairs(text: str, pos: int, end: int, f: Finders) -> tuple[dict[str, Any], bool]:
    """Read ``<arg_key>/<arg_value>`` pairs; report whether the last one was cut off."""
    args: dict[str, Any] = {}
    while True:
        k = f.key_open.find(pos, end)
        if k < 0:
            return args, cut_in_opener(text, pos, end, _KEY_OPEN)
        k_body = k + len(_KEY_OPEN)
        k_end = f.key_close.find(k_body, end)
        if k_end < 0:
            return args, True
        key = text[k_body:k_end].strip()
        v = f.value_open.find(k_end, end)
        next_key = f.key_open.find(k_end, end)
        if v < 0 or 0 <= next_key < v:
            args[key] = ""
            if next_key < 0:
                return args, True
            pos = next_key
            continue
        v_body = v + len(_VALUE_OPEN)
        v_end = f.value_close.find(v_body, end)
        if v_end < 0:
            args[key] = xml_value(text[v_body:end])
            return args, True
        args[key] = xml_value(text[v_body:v_end])
        pos = v_end + len(_VALUE_CLOSE)
