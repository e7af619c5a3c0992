"""Turn OpenAI-compatible wire payloads into backend events, whatever the server's dialect.

Pure functions of plain dicts (the JSON of one SSE chunk or one response), so recorded payloads can be
replayed without a client. What differs between servers:

- reasoning: vLLM sends ``reasoning`` (older releases ``reasoning_content``), llama.cpp's server sends
  ``reasoning_content``, OpenRouter sends ``reasoning`` plus structured ``reasoning_details``. Each dialect
  reads its own field first and falls back to the others, and only one field is taken per delta, so a
  server that fills two of them with the same text is not counted twice. Without any reasoning field, a
  ``<think>`` block stays in the content for the parser to split.
- tool-call deltas: OpenAI sends ``id`` and ``name`` only on the first delta of a call; llama-cpp-python
  repeats both on every delta. Each call's ``id`` and ``name`` are emitted once.
- usage comes in a last chunk with no choices (``stream_options.include_usage``); OpenRouter adds ``cost``
  and names the serving ``provider`` on every chunk.
- errors inside an HTTP 200 stream: OpenRouter's chunk with ``error: {code, message}`` and
  ``finish_reason: "error"``, or vLLM's ``{"object": "error", "message": ..., "code": ...}``, raise
  ``ProviderError``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tooldispatch.backends.base import (
    ContentDelta,
    Event,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallDelta,
    Usage,
)
from tooldispatch.errors import ProviderError

Dialect = Literal["vllm", "llama-server", "openrouter"]
DIALECTS: tuple[Dialect, ...] = ("vllm", "llama-server", "openrouter")

_REASONING_FIELDS: dict[str, tuple[str, ...]] = {
    "vllm": ("reasoning", "reasoning_content"),
    "llama-server": ("reasoning_content", "reasoning"),
    "openrouter": ("reasoning", "reasoning_content"),
}


def reasoning_text(part: Mapping[str, Any], dialect: Dialect) -> str:
    """Return the reasoning text carried by a delta or a message (``""`` when there is none).

    Args:
        part: a streamed ``delta`` or a response ``message``.
        dialect: the server's dialect, which decides which field is read first.
    """
    for name in _REASONING_FIELDS[dialect]:
        value = part.get(name)
        if isinstance(value, str) and value:
            return value
    details = part.get("reasoning_details")
    if isinstance(details, Sequence) and not isinstance(details, str):
        pieces: list[str] = []
        for item in details:
            if not isinstance(item, Mapping):
                continue
            for key in ("text", "summary"):
                value = item.get(key)
                if isinstance(value, str):
                    pieces.append(value)
                    break
        return "".join(pieces)
    return ""


def raise_for_stream_error(payload: Mapping[str, Any]) -> None:
    """Raise ``ProviderError`` when a chunk or response carries an ``error`` object.

    Raises:
        ProviderError: the payload reports an error; the message names its code.
    """
    error = payload.get("error")
    if not error and payload.get("object") == "error":
        error = payload
    if not error:
        return
    code: Any = None
    message = ""
    if isinstance(error, Mapping):
        code = error.get("code")
        message = str(error.get("message") or "")
    else:
        message = str(error)
    provider = payload.get("provider")
    where = f" from provider {provider}" if isinstance(provider, str) and provider else ""
    raise ProviderError(
        f"the server reported an error inside an HTTP 200 response{where}: code {code!r}: {message[:500]}",
        status=code if isinstance(code, int) else None,
        retryable=isinstance(code, int) and code in (408, 429, 502, 503),
    )


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    cost = raw.get("cost")
    return Usage(
        prompt_tokens=_count(raw.get("prompt_tokens")),
        completion_tokens=_count(raw.get("completion_tokens")),
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
    )


def _count(value: Any) -> int:
    """A token count as reported (a number, or digits in a string); 0 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return 0


def _malformed(what: str, value: Any) -> ProviderError:
    """The error for a payload part that is not the shape the chat completions API defines."""
    return ProviderError(
        f"the server sent {what} ({type(value).__name__}: {value!r:.120}); "
        "check that the endpoint speaks the OpenAI chat completions API (a base URL ending in /v1)"
    )


def _choices(payload: Mapping[str, Any], what: str) -> list[Mapping[str, Any]]:
    """The first choice of a chunk or response (none when it has no choices), checked for its shape.

    Raises:
        ProviderError: ``choices`` is not a list of objects.
    """
    choices = payload.get("choices")
    if choices is None:
        return []
    if not isinstance(choices, list | tuple):
        raise _malformed(f"a {what} whose choices are not a list", choices)
    first = list(choices[:1])
    if first and not isinstance(first[0], Mapping):
        raise _malformed(f"a {what} whose choice is not an object", first[0])
    return first


def _part(choice: Mapping[str, Any], key: str, what: str) -> Mapping[str, Any]:
    """``choice[key]`` (the delta or the message) as an object; an empty one when absent.

    Raises:
        ProviderError: it is there but not an object.
    """
    part = choice.get(key)
    if part is None:
        return {}
    if not isinstance(part, Mapping):
        raise _malformed(f"a {what} whose {key} is not an object", part)
    return part


def _arguments(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


class StreamNormalizer:
    """Stateful translation of one stream's chunks into events.

    Feed each decoded chunk to ``feed`` in order, then call ``finish`` once the stream has ended: it
    closes an open reasoning span and emits ``Usage`` (when reported) and the final ``Finish``.
    """

    def __init__(self, dialect: Dialect) -> None:
        """Start a stream in ``dialect``."""
        self.dialect: Dialect = dialect
        self._reasoning_open = False
        self._calls_seen: dict[int, tuple[bool, bool]] = {}
        self._finish_reason: str | None = None
        self._model: str | None = None
        self._provider: str | None = None
        self._usage: Usage | None = None

    def _end_reasoning(self, out: list[Event]) -> None:
        if self._reasoning_open:
            self._reasoning_open = False
            out.append(ReasoningEnd())

    def _tool_call(self, position: int, raw: Mapping[str, Any]) -> ToolCallDelta:
        index = raw.get("index")
        index = index if isinstance(index, int) else position
        fn = raw.get("function")
        if not isinstance(fn, Mapping):
            fn = {}
        id_sent, name_sent = self._calls_seen.get(index, (False, False))
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") and not id_sent else None
        name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") and not name_sent else None
        self._calls_seen[index] = (id_sent or call_id is not None, name_sent or name is not None)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=_arguments(fn.get("arguments")))

    def feed(self, chunk: Mapping[str, Any]) -> list[Event]:
        """Translate one chunk into the events it carries.

        Raises:
            ProviderError: the chunk carries an in-stream error, or is not shaped as a chat completion chunk.
        """
        raise_for_stream_error(chunk)
        out: list[Event] = []
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        if isinstance(chunk.get("provider"), str):
            self._provider = chunk["provider"]
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        for choice in _choices(chunk, "stream chunk"):
            delta = _part(choice, "delta", "stream chunk")
            text = reasoning_text(delta, self.dialect)
            if text:
                self._reasoning_open = True
                out.append(ReasoningDelta(text))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._end_reasoning(out)
                out.append(ContentDelta(content))
            calls = delta.get("tool_calls")
            for position, raw in enumerate(calls if isinstance(calls, list | tuple) else ()):
                if isinstance(raw, Mapping):
                    self._end_reasoning(out)
                    out.append(self._tool_call(position, raw))
            reason = choice.get("finish_reason")
            if reason == "error":
                raise ProviderError("the server ended the stream with finish_reason 'error' and gave no details")
            if isinstance(reason, str):
                self._finish_reason = reason
        return out

    def finish(self) -> list[Event]:
        """Close the stream: end open reasoning, then ``Usage`` (when reported) and ``Finish``."""
        out: list[Event] = []
        self._end_reasoning(out)
        if self._usage is not None:
            out.append(self._usage)
        out.append(Finish(self._finish_reason, model=self._model, provider=self._provider))
        return out


def response_events(response: Mapping[str, Any], dialect: Dialect) -> list[Event]:
    """Translate a whole (non-streaming) chat completion into the events a stream would have carried.

    Raises:
        ProviderError: the response carries an error object, or is not shaped as a chat completion.
    """
    raise_for_stream_error(response)
    out: list[Event] = []
    reason: str | None = None
    for choice in _choices(response, "response"):
        message = _part(choice, "message", "response")
        text = reasoning_text(message, dialect)
        if text:
            out.append(ReasoningDelta(text))
            out.append(ReasoningEnd())
        content = message.get("content")
        if isinstance(content, str) and content:
            out.append(ContentDelta(content))
        calls = message.get("tool_calls")
        for position, raw in enumerate(calls if isinstance(calls, list | tuple) else ()):
            if not isinstance(raw, Mapping):
                continue
            fn = raw.get("function")
            fn = fn if isinstance(fn, Mapping) else {}
            ident, name = raw.get("id"), fn.get("name")
            out.append(
                ToolCallDelta(
                    index=position,
                    id=ident if isinstance(ident, str) and ident else None,
                    name=name if isinstance(name, str) and name else None,
                    arguments=_arguments(fn.get("arguments")),
                )
            )
        reason = choice.get("finish_reason")
        if reason == "error":
            raise ProviderError("the server answered with finish_reason 'error' and gave no details")
    usage = _usage(response.get("usage"))
    if usage is not None:
        out.append(usage)
    model = response.get("model")
    provider = response.get("provider")
    out.append(
        Finish(
            reason if isinstance(reason, str) else None,
            model=model if isinstance(model, str) else None,
            provider=provider if isinstance(provider, str) else None,
        )
    )
    return out
