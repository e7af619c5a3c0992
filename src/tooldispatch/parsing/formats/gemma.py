"""Gemma-style fenced tool calls: ```` ```tool_code ```` (Python calls) and ```` ```tool_call ```` (JSON or Python)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import pythonic
from tooldispatch.parsing.formats._common import (
    FIX_UNCLOSED,
    calls_from_payload,
    make_call,
    match_name,
    skip_ws,
)
from tooldispatch.parsing.formats._format import CallGrammar, CallList, Format, PromptFormat
from tooldispatch.parsing.formats._prompt import py_call, tool_lines
from tooldispatch.toolspec import ToolSpec

FORMAT: Final = "gemma"
MARKERS: Final[tuple[str, ...]] = ("```tool_code", "```tool_call")
_FENCE_CLOSE: Final = "```"
# Linear: a literal prefix and one alternation of literals.
_FENCE_OPEN: Final = re.compile(r"```(?:tool_code|tool_call)[ \t]*\n?")


def find(text: str) -> list[RawCall]:
    """Find every ``tool_code``/``tool_call`` fence; each fence may hold several calls."""
    out: list[RawCall] = []
    pos = 0
    n = len(text)
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if m is None:
            return out
        body_start = m.end()
        close = text.find(_FENCE_CLOSE, body_start)
        closed = close >= 0
        body_end = close if closed else n
        end = close + len(_FENCE_CLOSE) if closed else n
        pos = end
        span = (m.start(), end)
        body = text[body_start:body_end]
        fixes: tuple[str, ...] = () if closed else (FIX_UNCLOSED,)
        first = skip_ws(text, body_start, body_end)
        if first >= body_end:
            continue
        if text[first] == "{" or text.startswith("[{", first):
            out.extend(calls_from_payload(text, span, FORMAT, body, fixes=fixes, truncated=not closed))
            continue
        calls = pythonic.parse_python_calls(body)
        if calls is None:
            start = first + 1 if text[first] == "[" else first
            name = match_name(text, skip_ws(text, start, body_end))
            if name is None:
                # Nothing here names a call (a tag of another format, prose): leave the text to the other finders.
                pos = body_start
                continue
            out.append(
                make_call(
                    text,
                    span,
                    FORMAT,
                    name,
                    arguments_text=body,
                    decode_error="not a Python call",
                    fixes=fixes,
                    truncated=not closed,
                )
            )
            continue
        out.extend(
            make_call(
                text,
                span,
                FORMAT,
                c.name,
                arguments=c.arguments,
                decode_error=c.error,
                fixes=fixes,
                truncated=not closed,
            )
            for c in calls
        )


def _system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below, described as JSON schemas. To call a function, write a "
        "Python call with keyword arguments inside a tool_code block, for example\n"
        '```tool_code\nfunction_name(argument_name="value")\n```\n'
        "The result comes back in a tool_output block. When no call is needed, answer in plain text.\n\n"
        f"{tool_lines(tools)}"
    )


def _calls(calls: CallList) -> str:
    return "\n".join(f"```tool_code\n{py_call(n, a)}\n```" for n, a in calls)


def _tool_output(content: str) -> str:
    return f"```tool_output\n{content}\n```"


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    prompts=(
        PromptFormat(
            "gemma_tool_code",
            _system,
            _calls,
            _tool_output,
            CallGrammar("python", "```tool_code\n", "\n```", many=False, start="`"),
            families=("gemma2", "gemma3"),
        ),
    ),
)
"""Gemma: ``tool_code`` fences (held by the stream parser as fences); results go back in ``tool_output`` fences."""
