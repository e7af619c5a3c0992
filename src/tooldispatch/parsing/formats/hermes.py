"""Hermes / Qwen 2.5-3 tool calls: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""

from __future__ import annotations

from collections.abc import Sequence
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
from tooldispatch.parsing.formats._format import CallGrammar, CallList, Format, PromptFormat
from tooldispatch.parsing.formats._prompt import dumps, tool_lines, tool_response
from tooldispatch.toolspec import ToolSpec

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


def _system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You may call functions to help with the user's request. The functions are described as JSON "
        "schemas inside <tools></tools> tags:\n"
        f"<tools>\n{tool_lines(tools)}\n</tools>\n\n"
        "To call a function, write a JSON object with its name and arguments inside <tool_call></tool_call> "
        "tags, one block per call:\n"
        '<tool_call>\n{"name": "function_name", "arguments": {"argument_name": "value"}}\n</tool_call>\n'
        "Use only the functions listed above, and only argument values the user gave or a result returned. "
        "When no call is needed, answer in plain text."
    )


def _calls(calls: CallList) -> str:
    return "\n".join(f"<tool_call>\n{dumps({'name': n, 'arguments': dict(a)})}\n</tool_call>" for n, a in calls)


def _list_system(tools: Sequence[ToolSpec]) -> str:
    listed = dumps([t.to_openai()["function"] for t in tools])
    return (
        "You may call functions to help with the user's request. The functions are described as JSON "
        f"inside <tools></tools> tags:\n<tools>{listed}</tools>\n\n"
        "To call functions, answer with only a JSON list of calls inside <tool_call></tool_call> tags:\n"
        '<tool_call>[{"name": "function_name", "arguments": {"argument_name": "value"}}]</tool_call>\n'
        "Use only the functions listed above. When no call is needed, answer in plain text."
    )


def _list_calls(calls: CallList) -> str:
    return "<tool_call>" + dumps([{"name": n, "arguments": dict(a)} for n, a in calls]) + "</tool_call>"


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    auto_find=find_tool_call_tags,
    other_names=("qwen",),
    prompts=(
        PromptFormat(
            "hermes",
            _system,
            _calls,
            tool_response,
            CallGrammar("json", "<tool_call>\n", "\n</tool_call>", many=False, start="<", lazy_shape="tool_call_tag"),
            families=("qwen2", "qwen2moe", "qwen3", "qwen3moe"),
        ),
        PromptFormat(
            "hermes_list",
            _list_system,
            _list_calls,
            tool_response,
            CallGrammar("json", "<tool_call>[", "]</tool_call>", many=True, start="<"),
        ),
    ),
)
"""Hermes: ``<tool_call>`` blocks of JSON; in prompt mode one block per call, or one JSON list of calls."""
