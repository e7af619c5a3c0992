"""One model turn through the proxy, non-streamed: collect the upstream's output, parse it, answer.

The parser reads the content, and the reasoning the upstream split off is handed to it apart (``reasoning=``,
as the agent loop does), so a call the model wrote inside its reasoning is still recovered and flagged; the
streamed path (``stream``) hands the parser the same content and reasoning, so both answer the same calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from typing import Any, Final

from tooldispatch.backends.base import Completion, Event, Usage, collect
from tooldispatch.errors import ContextWindowExceeded
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.proxy.guard import FLAG, answered_calls, applies, mark, only_repeats, without_calls
from tooldispatch.proxy.stats import RequestStats, record_json
from tooldispatch.proxy.translate import ProxyRequest, completion_json, usage_json
from tooldispatch.proxy.upstream import Upstream
from tooldispatch.types import ParseOutcome, ToolCall


def outcome_of(request: ProxyRequest, completion: Completion) -> ParseOutcome:
    """Parse a whole turn with the request's tools (the upstream's native calls are repaired and validated)."""
    return parse_tool_calls(
        completion.content,
        request.tools,
        reasoning=completion.reasoning,
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


def rejected_text(outcome: ParseOutcome, content: str = "") -> str:
    """The text of the rejected call candidates that ``content`` does not already hold, for an answer that carries
    no call (so it is never lost; a candidate the parser left in the prose, such as a call it judged ambiguous, is
    not repeated)."""
    return "\n".join(c.raw for c in outcome.rejected if c.span != (-1, -1) and c.raw not in content)


def with_rejected(content: str, outcome: ParseOutcome) -> str:
    """``content`` followed by the rejected candidates' text (an answer without calls keeps what the model wrote)."""
    lost = rejected_text(outcome, content)
    if not lost:
        return content
    return f"{content}\n{lost}" if content else lost


def finish_of(finish_reason: str | None, calls: bool) -> str:
    """The finish reason to answer: ``length`` whenever the cap cut the output, calls or not."""
    if finish_reason == "length":
        return "length"
    return "tool_calls" if calls else (finish_reason or "stop")


async def first_events(
    upstream: Upstream, request: ProxyRequest, stats: RequestStats, *, stream: bool
) -> AsyncGenerator[Event, None]:
    """The turn's events, its completion budget clamped to what is left of the context window when needed.

    When the prompt fits but the prompt and ``max_tokens`` do not, the turn is asked again with ``max_tokens``
    cut to the room left (the budget used is the request's ``budget`` in the statistics and the
    ``x-tooldispatch-completion-budget`` header).

    Raises:
        ContextWindowExceeded: the prompt alone does not fit.
    """
    chat = upstream.prepare(request)
    events = upstream.events(chat, stream=stream)
    try:
        try:
            first = await anext(events)
        except ContextWindowExceeded as exc:
            left = exc.n_ctx - exc.prompt_tokens
            if not exc.prompt_tokens or left < 1 or left >= chat.max_tokens:
                raise
            await events.aclose()  # type: ignore[attr-defined]
            events = upstream.events(replace(chat, max_tokens=left), stream=stream)
            first = await anext(events)
            stats.budget = left
        yield first
        async for event in events:
            yield event
    except StopAsyncIteration:
        return
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def complete(
    upstream: Upstream, request: ProxyRequest, stats: RequestStats, *, record: bool, guard: bool = False
) -> dict[str, Any]:
    """Run the turn without streaming and return the chat completion to answer.

    With ``guard``, a turn whose calls only repeat answered calls is generated again without calls (``guard``).

    Raises:
        TooldispatchError: the upstream failed (the caller answers it in OpenAI's error shape).
    """
    completion = await collect(first_events(upstream, request, stats, stream=False))
    marked: dict[str, Any] = {}
    if request.parses:
        outcome = outcome_of(request, completion)
        calls = answered(request, outcome.calls)
        stats.count(outcome, len(calls))
        content, reasoning = outcome.content, outcome.reasoning
        if guard and applies(request) and only_repeats(calls, answered_calls(request.chat.messages, request.polling)):
            retry = await collect(first_events(upstream, without_calls(request), stats, stream=False))
            marked = mark(calls)
            stats.calls = 0
            stats.flags = ",".join(sorted({*filter(None, stats.flags.split(",")), FLAG}))
            calls, content, reasoning = (), retry.content, retry.reasoning
            completion = replace(retry, usage=_sum(completion.usage, retry.usage))
        elif not calls:
            content = with_rejected(content, outcome)
    else:
        calls, content, reasoning = (), completion.content, completion.reasoning
    usage = completion.usage
    answer = completion_json(
        model=upstream.model,
        content=content,
        reasoning=reasoning,
        calls=calls,
        finish_reason=finish_of(completion.finish_reason, bool(calls)),
        usage=usage_json(usage.prompt_tokens, usage.completion_tokens) if usage is not None else None,
    )
    if marked:
        answer["tooldispatch"] = marked
    stats.finish_reason = answer["choices"][0]["finish_reason"]
    if usage is not None:
        stats.prompt_tokens, stats.completion_tokens = usage.prompt_tokens, usage.completion_tokens
    if record:
        stats.record = record_json(request.body, raw_output(completion), answer)
    return answer


def _sum(a: Usage | None, b: Usage | None) -> Usage | None:
    """Both turns' tokens (a guarded answer cost two generations)."""
    if a is None or b is None:
        return b or a
    return Usage(
        prompt_tokens=a.prompt_tokens + b.prompt_tokens, completion_tokens=a.completion_tokens + b.completion_tokens
    )


def dumps(value: Any) -> bytes:
    """Compact JSON bytes."""
    return _COMPACT.encode(value).encode()


# Built once: ``json.dumps`` with options builds a new encoder on every call.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
