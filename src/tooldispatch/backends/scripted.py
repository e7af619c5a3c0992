"""A scripted backend: replays prepared turns through the real event stream.

Used across the test suite and by anyone who wants to exercise the agent loop, the parser and the
dispatcher without a model. Each turn may reason for a set time before answering, so clocks can be
tested with real timestamps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.backends.base import (
    Capabilities,
    ChatRequest,
    ContentDelta,
    Event,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallDelta,
    Usage,
)
from tooldispatch.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One prepared model turn.

    Attributes:
        content: the visible text (may hold tool calls in any format the parser reads).
        reasoning: reasoning text, streamed before the content.
        reasoning_s: seconds to spend "reasoning" before the reasoning ends.
        tool_calls: native calls as ``{"name": ..., "arguments": {...} or "json string"}``.
        finish_reason: what ``Finish`` reports.
        chunk: characters per streamed delta.
    """

    content: str = ""
    reasoning: str = ""
    reasoning_s: float = 0.0
    tool_calls: Sequence[Mapping[str, Any]] = ()
    finish_reason: str = "stop"
    chunk: int = 8


Script = Sequence[ScriptedTurn] | Callable[[ChatRequest], ScriptedTurn]


@dataclass
class ScriptedBackend:
    """Replays ``turns`` in order (or asks ``turns(request)`` for each one) and records every request.

    Attributes:
        turns: the prepared turns, or a function from the request to the next turn.
        requests: the requests received so far, in order.
    """

    turns: Script
    native_tools: bool = False
    requests: list[ChatRequest] = field(default_factory=list)

    @property
    def capabilities(self) -> Capabilities:
        """A scripted engine: native tool calls only when configured."""
        return Capabilities(native_tools=self.native_tools, reasoning_field=True, engine="scripted")

    def _next(self, request: ChatRequest) -> ScriptedTurn:
        if callable(self.turns):
            return self.turns(request)
        index = len(self.requests) - 1
        if index >= len(self.turns):
            raise ConfigError(f"the script has {len(self.turns)} turns; turn {index + 1} was requested")
        return self.turns[index]

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Yield the next turn's events: reasoning, reasoning end, content, native calls, usage, finish."""
        self.requests.append(request)
        turn = self._next(request)
        step = max(1, turn.chunk)
        produced = 0
        if turn.reasoning or turn.reasoning_s:
            for i in range(0, max(1, len(turn.reasoning)), step):
                yield ReasoningDelta(turn.reasoning[i : i + step])
            if turn.reasoning_s:
                await asyncio.sleep(turn.reasoning_s)
            produced += len(turn.reasoning)
            yield ReasoningEnd()
        for i in range(0, len(turn.content), step):
            yield ContentDelta(turn.content[i : i + step])
        produced += len(turn.content)
        for index, call in enumerate(turn.tool_calls):
            args = call.get("arguments", {})
            text = args if isinstance(args, str) else json.dumps(args)
            yield ToolCallDelta(index=index, id=f"call_{index}", name=str(call["name"]), arguments=text)
            produced += len(text)
        yield Usage(
            prompt_tokens=sum(len(str(m.get("content") or "")) for m in request.messages) // 4,
            completion_tokens=max(1, produced // 4),
        )
        yield Finish(reason=turn.finish_reason, model="scripted")
