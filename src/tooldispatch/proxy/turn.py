"""One model turn through the proxy, non-streamed: collect the upstream's output, parse it, answer.

The text given to the parser is the content with the reasoning the upstream split off put back in front of
it in ``<think>`` markers (as the agent loop does), so a call the model wrote inside its reasoning is still
recovered and flagged; the streamed path (``stream``) feeds the parser the same text, so both answer the
same calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from tooldispatch.backends.base import Completion, collect
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.proxy.stats import RequestStats, record_json
from tooldispatch.proxy.translate import ProxyRequest, completion_json, usage_json
from tooldispatch.proxy.upstream import Upstream
from tooldispatch.types import ParseOutcome, ToolCall


def parse_text(content: str, reasoning: str) -> str:
    """The text the parser reads: the split-off reasoning back in its markers, then the content."""
    return f"<think>{reasoning}</think>{content}" if reasoning else content


def outcome_of(request: ProxyRequest, completion: Completion) -> ParseOutcome:
    """Parse a whole turn with the request's tools (the upstream's native calls are repaired and validated)."""
    return parse_tool_calls(
        parse_text(completion.content, completion.reasoning),
        request.tools,
        native_calls=[c.to_openai() for c in completion.native_calls] or None,
        finish_reason=completion.finish_reason,
    )


def answered(request: ProxyRequest, calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls that go out: all of them, or the first when ``parallel_tool_calls`` is false."""
    return tuple(calls) if request.parallel else tuple(calls[:1])


def raw_output(completion: Completion) -> dict[str, Any]:
    """The upstream's raw output, as kept with ``--record`` (the replay corpus's fields)."""
    return {
        "text": completion.content,
        "reasoning": completion.reasoning,
        "native_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.native_calls],
        "finish_reason": completion.finish_reason,
    }


async def complete(upstream: Upstream, request: ProxyRequest, stats: RequestStats, *, record: bool) -> dict[str, Any]:
    """Run the turn without streaming and return the chat completion to answer.

    Raises:
        TooldispatchError: the upstream failed (the caller answers it in OpenAI's error shape).
    """
    completion = await collect(upstream.events(upstream.prepare(request), stream=False))
    if request.parses:
        outcome = outcome_of(request, completion)
        calls = answered(request, outcome.calls)
        stats.count(outcome, len(calls))
        content, reasoning = outcome.content, outcome.reasoning
    else:
        calls, content, reasoning = (), completion.content, completion.reasoning
    usage = completion.usage
    answer = completion_json(
        model=upstream.model,
        content=content,
        reasoning=reasoning,
        calls=calls,
        finish_reason=completion.finish_reason,
        usage=usage_json(usage.prompt_tokens, usage.completion_tokens) if usage is not None else None,
    )
    stats.finish_reason = answer["choices"][0]["finish_reason"]
    if usage is not None:
        stats.prompt_tokens, stats.completion_tokens = usage.prompt_tokens, usage.completion_tokens
    if record:
        stats.record = record_json(request.body, raw_output(completion), answer)
    return answer


def dumps(value: Any) -> bytes:
    """Compact JSON bytes."""
    return _COMPACT.encode(value).encode()


# Built once: ``json.dumps`` with options builds a new encoder on every call.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
