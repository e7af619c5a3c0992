"""The backend seam: a request in, a stream of timestamped events out.

Every engine (llama.cpp in-process, vLLM, llama-server, OpenRouter, a scripted double) implements
``Backend.stream``. Retries, recording and test guards wrap a backend; they do not subclass it.
Timestamps are ``time.monotonic()`` seconds, taken when the event was produced.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tooldispatch.toolspec import ToolSpec


class Omit:
    """The value of a ``ChatRequest.extra`` field to leave out of the body, so the server applies its default."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OMIT"


OMIT = Omit()


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One model turn to run.

    Attributes:
        messages: OpenAI-style chat messages (``role``, ``content``, ``tool_calls``, ``tool_call_id``).
        tools: the tools offered this turn.
        max_tokens: completion budget.
        temperature: sampling temperature.
        seed: sampling seed, when the engine supports one.
        stop: extra stop strings.
        tool_choice: ``auto``, ``none``, ``required`` or a tool name.
        constrained: ask the engine to constrain decoding to the tool-call grammar (llama.cpp GBNF).
        extra: engine-specific body fields (OpenRouter ``provider``, vLLM ``chat_template_kwargs``, ...); a
            field set to ``OMIT`` is left out of the body.
    """

    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[ToolSpec] = ()
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int | None = 0
    stop: Sequence[str] = ()
    tool_choice: str = "auto"
    constrained: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of reasoning text (from a ``reasoning`` field or split off by markers)."""

    text: str
    t: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class ReasoningEnd:
    """The model finished reasoning (``</think>`` seen, or the first content after reasoning deltas)."""

    t: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """A piece of visible output text (may contain tool calls in prompt mode)."""

    text: str
    t: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of a server-extracted (native) tool call, as streamed in OpenAI ``tool_calls`` deltas.

    Attributes:
        index: which call of the turn this delta belongs to.
        id: the call id, on the first delta of a call.
        name: the function name, on the first delta of a call.
        arguments: a fragment of the arguments JSON string.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    t: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the turn, as reported by the engine."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    t: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class Finish:
    """The turn ended.

    Attributes:
        reason: ``stop``, ``length``, ``tool_calls`` or an engine-specific reason.
        model: the model that answered, when the engine said.
        provider: the provider that served it (OpenRouter), when known.
    """

    reason: str | None
    model: str | None = None
    provider: str | None = None
    t: float = field(default_factory=time.monotonic)


Event = ReasoningDelta | ReasoningEnd | ContentDelta | ToolCallDelta | Usage | Finish


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do, as data.

    Attributes:
        native_tools: the engine extracts tool calls itself (``tool_calls`` in responses).
        reasoning_field: the engine splits reasoning into its own field.
        constrained: the engine can constrain decoding to a grammar.
        engine: engine name for reports (``llama.cpp``, ``vllm``, ``openrouter``).
        engine_version: engine version, when known.
    """

    native_tools: bool = False
    reasoning_field: bool = False
    constrained: bool = False
    engine: str = ""
    engine_version: str = ""


@runtime_checkable
class Backend(Protocol):
    """A model engine. ``stream`` is the one required method."""

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do."""
        ...

    def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Run one turn and yield its events in order, ending with ``Finish``.

        Raises:
            BackendError: the engine failed (translated from the engine's own errors).
        """
        ...


@dataclass(frozen=True, slots=True)
class NativeCall:
    """A server-extracted tool call, assembled from its deltas."""

    id: str | None
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI ``tool_calls`` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class Completion:
    """A whole turn, collected from its events.

    Attributes:
        content: the visible text.
        reasoning: the reasoning text.
        native_calls: server-extracted tool calls.
        finish_reason: why the turn ended.
        usage: token counts, when reported.
        started: when the request was sent.
        first_token_t: when the first event arrived.
        reasoning_start_t: first reasoning delta.
        reasoning_end_t: when reasoning ended.
        finished_t: when ``Finish`` arrived.
        model: model name the engine reported.
        provider: provider that served it, when known.
    """

    content: str
    reasoning: str
    native_calls: tuple[NativeCall, ...]
    finish_reason: str | None
    usage: Usage | None
    started: float
    first_token_t: float | None
    reasoning_start_t: float | None
    reasoning_end_t: float | None
    finished_t: float
    model: str | None = None
    provider: str | None = None

    @property
    def reasoning_s(self) -> float:
        """Seconds from the first reasoning token to the end of reasoning (0 when there was none)."""
        if self.reasoning_start_t is None:
            return 0.0
        end = self.reasoning_end_t if self.reasoning_end_t is not None else self.finished_t
        return max(0.0, end - self.reasoning_start_t)

    @property
    def model_s(self) -> float:
        """Seconds from sending the request to the end of the turn."""
        return max(0.0, self.finished_t - self.started)


async def collect(events: AsyncIterator[Event], *, started: float | None = None) -> Completion:
    """Drain a backend's event stream into a ``Completion``."""
    t0 = time.monotonic() if started is None else started
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: Usage | None = None
    finish: Finish | None = None
    first: float | None = None
    r_start: float | None = None
    r_end: float | None = None
    async for ev in events:
        if first is None:
            first = ev.t
        if isinstance(ev, ReasoningDelta):
            if r_start is None:
                r_start = ev.t
            reasoning.append(ev.text)
        elif isinstance(ev, ReasoningEnd):
            r_end = ev.t if r_end is None else r_end
        elif isinstance(ev, ContentDelta):
            if r_start is not None and r_end is None and ev.text.strip():
                r_end = ev.t
            content.append(ev.text)
        elif isinstance(ev, ToolCallDelta):
            slot = calls.setdefault(ev.index, {"id": None, "name": "", "arguments": []})
            if ev.id:
                slot["id"] = ev.id
            if ev.name:
                slot["name"] += ev.name
            slot["arguments"].append(ev.arguments)
        elif isinstance(ev, Usage):
            usage = ev
        elif isinstance(ev, Finish):
            finish = ev
    natives = tuple(
        NativeCall(id=s["id"], name=s["name"], arguments="".join(s["arguments"])) for _, s in sorted(calls.items())
    )
    return Completion(
        content="".join(content),
        reasoning="".join(reasoning),
        native_calls=natives,
        finish_reason=finish.reason if finish else None,
        usage=usage,
        started=t0,
        first_token_t=first,
        reasoning_start_t=r_start,
        reasoning_end_t=r_end,
        finished_t=finish.t if finish else time.monotonic(),
        model=finish.model if finish else None,
        provider=finish.provider if finish else None,
    )
