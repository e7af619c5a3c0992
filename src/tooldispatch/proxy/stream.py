"""One model turn through the proxy, streamed as Server-Sent Events without buffering the turn.

``SseTurn`` turns the upstream's events into ``chat.completion.chunk`` events as they arrive:

- reasoning deltas go out at once (as ``reasoning_content`` and ``reasoning``); the parser takes them apart from
  the content (``StreamParser.feed_reasoning``), as the agent and the whole-answer path hand reasoning over;
- content goes through a ``StreamParser``, which holds back only what may still start a tool call; what it
  lets go goes out at once;
- the end of the reasoning goes out at once as an empty content delta, even while the text after it is held;
- each call goes out as one ``tool_calls`` delta as soon as it is complete: a call written in the text when
  its closing marker arrives, a call the upstream extracted (server mode) when the next one starts;
- at the end, the turn's final outcome (the same parse the non-streamed path makes of the same text) decides:
  every final call not yet sent goes out, then the finish reason (``tool_calls`` when calls went out), the
  usage when asked, and ``[DONE]``.

A call sent early stays sent: the parser's early reports are checked against the final outcome by its own
tests, and the proxy's tests compare streamed and non-streamed answers.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tooldispatch.backends.base import (
    ContentDelta,
    Event,
    Finish,
    NativeCall,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallDelta,
    Usage,
)
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.stream import CallReady, ContentText, ReasoningEnded, ReasoningText, StreamParser
from tooldispatch.proxy.guard import FLAG, answered_calls, applies, mark
from tooldispatch.proxy.stats import RequestStats
from tooldispatch.proxy.translate import ProxyRequest, new_id, tool_call_json, usage_json
from tooldispatch.proxy.turn import finish_of, with_rejected
from tooldispatch.types import ParseOutcome, ToolCall, call_key

DONE = b"data: [DONE]\n\n"


class SseTurn:
    """The SSE chunks of one streamed turn, built from the upstream's events.

    Args:
        request: the checked request.
        model: the model name the chunks carry.
        stats: the request's statistics, filled in as the turn ends.
        record: keep the raw output and the answer (``--record``).
    """

    def __init__(
        self, request: ProxyRequest, model: str, stats: RequestStats, *, record: bool = False, guard: bool = False
    ) -> None:
        self.request = request
        self.stats = stats
        self.record = record
        self._meta = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": int(time.time())}
        self._meta["model"] = model
        self._head = (json.dumps(self._meta)[:-1] + ', "choices": [{"index": 0, ').encode()
        self._parser = StreamParser(request.tools) if request.parses else None
        self._text: list[str] = []  # the content the parser read
        self._given: list[str] = []  # the reasoning the upstream split off, handed to the parser apart
        self._upstream_reasoning = False  # inside reasoning the upstream split off
        self._reasoning_shown = False
        self._natives: dict[int, list[str]] = {}  # index -> [id, name, arguments...]
        self._native_done = 0
        self._sent: list[ToolCall] = []
        self._sent_json: list[dict[str, Any]] = []
        self._usage: Usage | None = None
        self._finish: Finish | None = None
        self._content: list[str] = []
        # Content after a side-effecting call the parser holds for the end: sent then, in order, with the call
        # or (when the call is refused) as the whole answer's content, so streamed and whole answers agree.
        self._after_held: list[str] = []
        self._reasoning: list[str] = []
        self.started = False
        # The repeat guard (``guard``): calls that repeat an answered call are held back until a new call comes
        # (then they go out before it) or the turn ends with nothing else (then the turn is asked again).
        self._done = (
            answered_calls(request.chat.messages, request.polling) if guard and applies(request) else frozenset()
        )
        self._held: list[ToolCall] = []
        self._repeated: list[ToolCall] = []
        self._settled = False

    def chunk(self, delta: Mapping[str, Any], finish_reason: str | None = None) -> bytes:
        """One ``data:`` event carrying ``delta``."""
        reason = "null" if finish_reason is None else json.dumps(finish_reason)
        body = json.dumps(delta, ensure_ascii=False)
        return (
            b"data: "
            + self._head
            + b'"delta": '
            + body.encode()
            + b', "finish_reason": '
            + reason.encode()
            + b"}]}\n\n"
        )

    def opening(self) -> bytes:
        """The first chunk: the assistant role."""
        self.started = True
        return self.chunk({"role": "assistant", "content": ""})

    # -- events -------------------------------------------------------------------------------------------

    def feed(self, event: Event) -> list[bytes]:
        """The chunks one upstream event completes (often one, sometimes none)."""
        if isinstance(event, ContentDelta):
            out = self._end_upstream_reasoning()
            if self._parser is None:
                self._content.append(event.text)
                out.append(self.chunk({"content": event.text}))
                return out
            self._text.append(event.text)
            out.extend(self._parsed(self._parser.feed(event.text)))
            return out
        if isinstance(event, ReasoningDelta):
            if self._parser is None:
                self._reasoning.append(event.text)
                return [self.chunk({"reasoning_content": event.text, "reasoning": event.text})]
            self._upstream_reasoning = True
            self._given.append(event.text)
            return self._parsed(self._parser.feed_reasoning(event.text))
        if isinstance(event, ReasoningEnd):
            if self._parser is None:
                return self._reasoning_end()
            return self._end_upstream_reasoning()
        if isinstance(event, ToolCallDelta):
            return self._native(event)
        if isinstance(event, Usage):
            self._usage = event
        elif isinstance(event, Finish):
            self._finish = event
        return []

    def _reasoning_end(self) -> list[bytes]:
        if self._reasoning_shown:
            return []
        self._reasoning_shown = True
        return [self.chunk({"content": ""})]

    def _end_upstream_reasoning(self) -> list[bytes]:
        """The end of the reasoning the upstream split off: at its ``ReasoningEnd``, its first content, or the end."""
        if not self._upstream_reasoning:
            return []
        self._upstream_reasoning = False
        return self._reasoning_end()

    def _parsed(self, events: tuple[Any, ...]) -> list[bytes]:
        out: list[bytes] = []
        for ev in events:
            if isinstance(ev, ContentText):
                if self._parser is not None and self._parser.withholding:
                    self._after_held.append(ev.text)
                    continue
                self._content.append(ev.text)
                out.append(self.chunk({"content": ev.text}))
            elif isinstance(ev, CallReady):
                out.extend(self._send(ev.call))
            elif isinstance(ev, ReasoningText):
                self._reasoning.append(ev.text)
                out.append(self.chunk({"reasoning_content": ev.text, "reasoning": ev.text}))
            elif isinstance(ev, ReasoningEnded):
                out.extend(self._reasoning_end())
        return out

    def _send(self, call: ToolCall) -> list[bytes]:
        if self._sent and not self.request.parallel:
            return []
        if self._done:
            if not self._sent and call_key(call.name, call.arguments) in self._done:
                self._held.append(call)
                return []
            held, self._held = self._held, []
            out = [chunk for c in held for chunk in self._emit(c)]
            return out + self._emit(call)
        return self._emit(call)

    def _emit(self, call: ToolCall) -> list[bytes]:
        if self._sent and not self.request.parallel:
            return []
        entry = tool_call_json(call, new_id("call_"), len(self._sent))
        self._sent.append(call)
        self._sent_json.append(entry)
        return [self.chunk({"tool_calls": [entry]})]

    def _native(self, delta: ToolCallDelta) -> list[bytes]:
        out: list[bytes] = []
        if delta.index not in self._natives:
            out.extend(self._natives_complete(below=delta.index))
            self._natives[delta.index] = ["", ""]
        slot = self._natives[delta.index]
        if delta.id and not slot[0]:
            slot[0] = delta.id
        if delta.name:
            slot[1] += delta.name
        slot.append(delta.arguments)
        return out

    def _native_calls(self, indexes: list[int]) -> list[NativeCall]:
        calls = []
        for i in indexes:
            slot = self._natives[i]
            calls.append(NativeCall(id=slot[0] or None, name=slot[1], arguments="".join(slot[2:])))
        return calls

    def _natives_complete(self, *, below: int) -> list[bytes]:
        """Send the upstream's calls that are complete: every one before a call that has started."""
        ready = sorted(i for i in self._natives if i < below)[self._native_done :]
        if not ready:
            return []
        self._native_done += len(ready)
        natives = [c.to_openai() for c in self._native_calls(ready)]
        outcome = parse_tool_calls("", self.request.tools, native_calls=natives)
        out: list[bytes] = []
        for call in outcome.calls:
            out.extend(self._send(call))
        return out

    # -- the end ------------------------------------------------------------------------------------------

    def settle(self) -> list[bytes]:
        """The chunks the end of the upstream's output completes: held content, calls not sent yet, and (when no
        call goes out) the text of rejected call candidates, so the client still gets what the model wrote.

        After it, ``guarded`` says whether the turn must be asked again without calls (``feed_retry``).
        """
        finish_reason = self._finish.reason if self._finish is not None else None
        out: list[bytes] = []
        if self._parser is None:
            return out
        out.extend(self._end_upstream_reasoning())
        closing = self._parser.close(finish_reason)
        out.extend(self._parsed(tuple(e for e in closing if not isinstance(e, CallReady))))
        outcome = self._final(finish_reason)
        if outcome.calls:
            held, self._after_held = "".join(self._after_held), []
            out.extend(self._content_chunk(held))
        final = outcome.calls if self.request.parallel else outcome.calls[:1]
        sent = Counter(call_key(c.name, c.arguments) for c in self._sent + self._held)
        for call in final:
            key = call_key(call.name, call.arguments)
            if sent[key]:
                sent[key] -= 1
            else:
                out.extend(self._send(call))
        self.stats.count(outcome, len(self._sent))
        if self._held and not self._sent:
            self._repeated, self._held = self._held, []
            self.stats.flags = ",".join(sorted({*filter(None, self.stats.flags.split(",")), FLAG}))
            self._finish = None
        elif not self._sent:
            out.extend(self._catch_up(outcome))
        return out

    def _catch_up(self, outcome: ParseOutcome) -> list[bytes]:
        """What the whole answer's content has and the stream has not sent: text the stream held as a possible
        call that turned out to be prose, and the text of rejected candidates (an answer without calls keeps
        what the model wrote)."""
        target = with_rejected(outcome.content, outcome)
        emitted = "".join(self._content)
        if target.startswith(emitted):
            return self._content_chunk(target[len(emitted) :])
        missing = "\n".join(c.raw for c in outcome.rejected if c.span != (-1, -1) and c.raw not in emitted)
        return self._content_chunk(f"\n{missing}" if missing and emitted else missing)

    @property
    def guarded(self) -> bool:
        """Whether the turn's calls only repeated answered calls: the turn is to be asked again without calls."""
        return bool(self._repeated)

    def feed_retry(self, event: Event) -> list[bytes]:
        """The chunks one event of the turn asked again without calls completes (its content goes out as is)."""
        if isinstance(event, ContentDelta):
            return self._content_chunk(event.text)
        if isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
            return [self.chunk({"reasoning_content": event.text, "reasoning": event.text})]
        if isinstance(event, Usage):
            first = self._usage
            self._usage = (
                event
                if first is None
                else Usage(
                    prompt_tokens=first.prompt_tokens + event.prompt_tokens,
                    completion_tokens=first.completion_tokens + event.completion_tokens,
                )
            )
        elif isinstance(event, Finish):
            self._finish = event
        return []

    def _content_chunk(self, text: str) -> list[bytes]:
        if not text:
            return []
        self._content.append(text)
        return [self.chunk({"content": text})]

    def close(self) -> list[bytes]:
        """The last chunks: the finish reason, the usage, ``[DONE]`` (``settle`` first, when not called yet)."""
        out = [] if self._settled else self.settle()
        self._settled = True
        finish_reason = self._finish.reason if self._finish is not None else None
        reason = finish_of(finish_reason, bool(self._sent))
        if self._repeated:
            tail = json.dumps(
                {
                    **self._meta,
                    "tooldispatch": mark(self._repeated),
                    "choices": [{"index": 0, "delta": {}, "finish_reason": reason}],
                },
                ensure_ascii=False,
            )
            out.append(b"data: " + tail.encode() + b"\n\n")
        else:
            out.append(self.chunk({}, reason))
        self.stats.finish_reason = reason
        usage = self._usage
        if usage is not None:
            self.stats.prompt_tokens, self.stats.completion_tokens = usage.prompt_tokens, usage.completion_tokens
            if self.request.include_usage:
                tail_usage = {"choices": [], "usage": usage_json(usage.prompt_tokens, usage.completion_tokens)}
                out.append(b"data: " + json.dumps({**self._meta, **tail_usage}).encode() + b"\n\n")
        out.append(DONE)
        return out

    def _final(self, finish_reason: str | None) -> ParseOutcome:
        assert self._parser is not None
        if not self._natives:
            outcome = self._parser.outcome
            assert outcome is not None
            return outcome
        natives = [c.to_openai() for c in self._native_calls(sorted(self._natives))]
        return parse_tool_calls(
            "".join(self._text),
            self.request.tools,
            reasoning="".join(self._given),
            native_calls=natives,
            finish_reason=finish_reason,
        )

    def raw_output(self) -> dict[str, Any]:
        """The upstream's output as kept with ``--record``."""
        return {
            "text": "".join(self._text) if self._parser is not None else "".join(self._content),
            "reasoning": "".join(self._reasoning),
            "native_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments}
                for c in self._native_calls(sorted(self._natives))
            ],
            "finish_reason": self._finish.reason if self._finish is not None else None,
        }

    def answer(self) -> dict[str, Any]:
        """The streamed answer put together, as kept with ``--record``."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content)}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._sent:
            message["tool_calls"] = [{k: v for k, v in e.items() if k != "index"} for e in self._sent_json]
        return {"message": message, "finish_reason": self.stats.finish_reason}
