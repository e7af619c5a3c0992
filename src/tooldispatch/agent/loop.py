"""The agent loop: model turn → parse → dispatch → results back → next turn, until an end.

One async implementation (``Agent.arun``) with a thin sync wrapper (``Agent.run``). The loop knows
nothing about engines (it streams a ``Backend``) and nothing about how tools run (it hands calls to a
``Dispatcher``). Tool timers live in the dispatcher and start when the tool is invoked, so the time a
model spends reasoning never counts against a tool's budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.agent.feedback import (
    EARLY_ANSWER,
    FEEDBACK_STYLES,
    answerable,
    bare,
    rejection_payload,
    repeated_call_answer,
    repeated_rejection,
    tool_answer,
    unusable_output_feedback,
    without_extra_arguments,
)
from tooldispatch.agent.records import AgentRun, Budget, EndReason, Stuck, ToolRun, Turn
from tooldispatch.agent.repeat import Answered, answer_text, held_note, refused_attempts
from tooldispatch.agent.stuck import stuck_evidence
from tooldispatch.backends.base import Backend, ChatRequest, Completion, ContentDelta, Event, collect
from tooldispatch.dispatch import Dispatcher, DispatchResult, Registry
from tooldispatch.dispatch.refresh import STALE_REASON, refresher_call
from tooldispatch.errors import BackendError, ConfigError, ContextWindowExceeded
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.stream import CallReady, StreamParser
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import ParseOutcome, RepairSpec, ToolCall, call_key


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A model turn is about to be requested."""

    index: int


@dataclass(frozen=True, slots=True)
class ModelStreamed:
    """One event from the backend's stream (reasoning or content delta, native call delta, finish)."""

    index: int
    event: Event


@dataclass(frozen=True, slots=True)
class TurnParsed:
    """The parser's outcome for a finished turn."""

    index: int
    outcome: ParseOutcome
    completion: Completion


@dataclass(frozen=True, slots=True)
class CallDispatched:
    """A call came back from the dispatcher."""

    index: int
    run: ToolRun


@dataclass(frozen=True, slots=True)
class Decided:
    """The agent or the dispatcher did something on the model's behalf (or held something back), and why.

    Emitted at the moment it happens, so a live view shows it in order with the dispatches around it. ``kind``:
    ``drop_extra_arguments``, ``auto_refresh``, ``repeat_guard`` or ``stuck``.
    """

    index: int
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The run is over."""

    run: AgentRun


AgentEvent = TurnStarted | ModelStreamed | TurnParsed | CallDispatched | Decided | RunEnded
Observer = Callable[[AgentEvent], None]

GENERIC_SYSTEM = (
    "You are an assistant that completes tasks by calling the tools provided. Call a tool when you need "
    "information or need to act; when the task is done, answer in plain text without a tool call."
)
"""A generic instruction, the agent's default system prompt until the model's own replaced it; the benchmark suites
still pass it, so their runs stay comparable with earlier ones."""


ANSWER_TOOL = ToolSpec(
    name="final_answer",
    description="Give the final answer to the user's question. Call it once the tool results answer the question.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "The answer to the user's question."}},
        "required": ["answer"],
        "additionalProperties": False,
    },
    repair="bounded",  # declared read-only: it changes nothing (never dispatched)
)
"""The agent's own tool with ``answer_tool=True``: a call to it is the run's final answer (its ``answer``), never
dispatched. Small models that keep calling tools after the result they needed often call it instead."""


def _assistant_message(outcome: ParseOutcome, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant turn as the history keeps it: the text that is not a call, and the calls as ``tool_calls``.

    The calls go back only once, as ``tool_calls`` with the ids the ``tool`` results answer, so the chat
    template renders each as a call followed by its result. Left in ``content`` too (vLLM's parser returns a
    call it could not extract as bare JSON there), the model would see every call twice, once as text with
    no result after it, and tends to send it again.
    """
    message: dict[str, Any] = {"role": "assistant", "content": outcome.content or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
            }
            for i, call in enumerate(calls)
        ]
    return message


def _tool_message(run: ToolRun, repeat_of: int | None = None, *, bare_feedback: bool = False) -> dict[str, Any]:
    """The ``tool`` message that answers one dispatched call; ``repeat_of``: the turn (0-based) whose identical
    call already succeeded, said in the answer (``repeated_call_answer``) unless the feedback is bare."""
    if repeat_of is None or bare_feedback:
        content = tool_answer(run.result, bare_feedback=bare_feedback)
    else:
        content = repeated_call_answer(run.result, repeat_of + 1)
    return {"role": "tool", "tool_call_id": run.call.id, "name": run.call.name, "content": content}


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:16]}"


def _unique_ids(calls: Sequence[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls with ids unique across turns and runs: the parser numbers each output's calls from
    ``call_0``, so each such id (or a missing one) is replaced by a random one; a server's own ids are kept."""
    out = []
    for call in calls:
        if call.id is None or (call.id.startswith("call_") and call.id[5:].isdigit()):
            call = dataclasses.replace(call, id=_new_call_id())
        out.append(call)
    return tuple(out)


def _loop_time(deadline: float | None) -> float | None:
    """A ``time.monotonic`` deadline on the running event loop's clock (``None`` stays ``None``)."""
    if deadline is None:
        return None
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())


class Agent:
    """Runs a task against a backend and a dispatcher.

    Args:
        backend: the model engine.
        dispatcher: runs the calls (``tooldispatch.Dispatcher``); or give ``registry`` (and ``store``) and
            one is made.
        registry: the tools, when no ``dispatcher`` is given.
        store: the dispatcher's SQLite file (``":memory:"`` by default), when no ``dispatcher`` is given.
        tools: the tools offered to the model (defaults to everything the dispatcher's registry has).
        repair: repair strength for the parser; by default ``bounded`` for read-only tools and
            ``lossless`` for side-effecting ones, from the registry's metadata.
        budget: turns, tokens and wall time.
        system_prompt: the system message. ``None`` (the default) sends none, so the model's chat template writes
            its own default (Qwen2.5's "You are Qwen, created by Alibaba Cloud. ..."), the one its tool-use
            training put before the tool block; a generic replacement moved small models to the wrong tool (see
            the agent section of ``docs/architecture.md``).
        max_tokens: completion budget per turn.
        constrained: ask the backend for grammar-constrained decoding.
        tool_choice: ``auto`` (the model calls a tool or answers; under ``constrained`` a call, once
            started, follows the grammar), ``required`` (every turn is a call, so the run ends at its turn
            budget, never with an answer) or one tool's name (every turn calls that tool).
        tool_format: the parser's format hint (``auto`` finds it).
        reasoning_open: the prompt opens a ``<think>`` block that the model closes.
        session_id: the dispatcher session (idempotency keys, quotas, saga); a fresh one by default.
        observer: called with every ``AgentEvent``, for live displays.
        request_extra: engine-specific request fields passed through (``ChatRequest.extra``).
        early_dispatch: start read-only, concurrency-safe calls as soon as the stream completes them,
            before the turn ends (side-effecting calls always wait for the whole turn).
        auto_refresh: when a call is refused as stale (``stale_state_must_refresh``) and the tool's refresher
            is declared read-only and callable with the refused call's arguments, run the refresher and then
            the call once more (``tooldispatch.dispatch.refresh``); both show in the turn's tool runs, the
            refresh with trigger ``auto_refresh``.
        drop_extra_arguments: when a call is refused only for argument keys its tool does not declare, and the
            tool is registered with ``extra_arguments="ignore"``, run it without those keys; the call is flagged
            ``dropped_extra_arguments`` with a ``drop_key`` repair per key. Off, or for any other tool, the model
            is told which keys to leave out.
        temperature: sampling temperature of every model turn (0: greedy).
        seed: sampling seed of every model turn (``None``: the engine's own).
        answer_tool: offer ``ANSWER_TOOL`` (``final_answer``) beside the tools. A turn that calls it ends the run
            with its ``answer`` as the final answer; the calls written before it in that turn run, the calls after
            it are refused (``after_final_answer``) and not run (a repeated ``final_answer`` is dropped). With
            ``early_dispatch``, the turn's stream is closed as soon as its ``final_answer`` call is complete, so the
            engine stops there (the turn's ``finish_reason`` is then ``None``). A ``final_answer`` written after other
            calls in its turn, before any call of the run has succeeded, rests on no result: it is answered with
            ``EARLY_ANSWER`` and the turn's calls run as in any turn. A plain-text
            answer still ends the run as well. A successful call identical to one that succeeded in an earlier turn
            is answered with its result and a note naming that turn and ``final_answer`` (``REPEATED_SUCCESS_NOTE``).
        repeat_guard: when every call of a turn repeats a call whose result is already in the conversation since the
            user's message (``agent/repeat.py``), dispatch none of them: generate the turn once more with
            ``tool_choice="none"`` and end the run with that text as the final answer (``answered_by="repeat_guard"``,
            the turns' ``held`` and ``tools_disabled``). If that text is again a call, the run ends ``stuck``. Only with
            ``tool_choice="auto"``: ``required`` or a tool's name asks for a call on every turn.
        polling_tools: tools whose identical calls may return new results (a status check): never held by the repeat
            guard, and never counted as a stuck repeat or an idle turn.
        tolerant_parsing: ``False`` reads each turn as a strict server-side parser does
            (``parse_tool_calls(tolerant=False)``): only calls the strict formats find in the content as written;
            a call that needed a tolerance stays text, and no call is recovered from the reasoning. Early dispatch
            is off with it (the stream parser reads tolerantly). Schema repair is still ``repair``'s to choose.
        feedback: ``full`` (the default: ``agent/feedback.py``'s signatures, suggestions, corrected calls and
            notes) or ``bare`` (each refusal or error as its kind, tool and message, a replayed call as its stored
            result).

    The budget's ``stuck_repeats`` and ``stuck_idle_turns`` end a run that makes no progress as ``stuck``, with the
    evidence in ``AgentRun.stuck`` (``agent/stuck.py``).
    """

    def __init__(
        self,
        *,
        backend: Backend,
        dispatcher: Dispatcher | None = None,
        registry: Registry | None = None,
        store: str | Path | None = None,
        tools: Sequence[ToolSpec] | None = None,
        repair: RepairSpec | None = None,
        budget: Budget | None = None,
        system_prompt: str | None = None,
        max_tokens: int = 512,
        constrained: bool = False,
        tool_choice: str = "auto",
        tool_format: str = "auto",
        reasoning_open: bool = False,
        session_id: str | None = None,
        observer: Observer | None = None,
        request_extra: Mapping[str, Any] | None = None,
        early_dispatch: bool = True,
        auto_refresh: bool = False,
        drop_extra_arguments: bool = False,
        temperature: float = 0.0,
        seed: int | None = 0,
        answer_tool: bool = False,
        repeat_guard: bool = True,
        polling_tools: Collection[str] = (),
        tolerant_parsing: bool = True,
        feedback: str = "full",
    ) -> None:
        if feedback not in FEEDBACK_STYLES:
            raise ConfigError(f"feedback must be one of {', '.join(FEEDBACK_STYLES)}, not {feedback!r}")
        if dispatcher is None:
            if registry is None:
                raise ConfigError("Agent needs a dispatcher= or a registry= (with an optional store=)")
            dispatcher = Dispatcher(registry, store=store if store is not None else ":memory:")
        elif registry is not None and registry is not dispatcher.registry:
            raise ConfigError("give either dispatcher= or registry=, not both: the dispatcher has its own registry")
        self.backend = backend
        self.dispatcher = dispatcher
        registry = dispatcher.registry
        self.tools: tuple[ToolSpec, ...] = tuple(tools) if tools is not None else tuple(registry.specs())
        self.answer_tool = answer_tool
        if answer_tool:
            if any(t.name == ANSWER_TOOL.name for t in self.tools):
                raise ConfigError(
                    f"a tool named {ANSWER_TOOL.name!r} is already offered; rename it or turn the answer tool off"
                )
            self.tools += (ANSWER_TOOL,)
        self.repair: RepairSpec | None = repair  # None: each ToolSpec's own level (Registry.specs() fills it)
        self.budget = budget or Budget()
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.constrained = constrained
        self.tool_choice = tool_choice
        self.tool_format = tool_format
        self.reasoning_open = reasoning_open
        self.session_id = session_id or f"s-{uuid.uuid4().hex[:12]}"
        self.observer = observer
        self.request_extra: Mapping[str, Any] = dict(request_extra or {})
        self.early_dispatch = early_dispatch
        self.auto_refresh = auto_refresh
        self.drop_extra_arguments = drop_extra_arguments
        self.temperature = temperature
        self.seed = seed
        self.repeat_guard = repeat_guard
        self.polling_tools = frozenset(polling_tools)
        self.tolerant_parsing = tolerant_parsing
        self.bare_feedback = feedback == "bare"
        self._tool_map = {t.name: t for t in self.tools}
        self._early: list[tuple[ToolCall, asyncio.Task[DispatchResult]]] = []

    def _emit(self, event: AgentEvent) -> None:
        if self.observer is not None:
            self.observer(event)

    def run(self, task: str, *, history: Sequence[Mapping[str, Any]] = ()) -> AgentRun:
        """Run ``task`` to an end (sync). Safe to call from inside a running event loop's thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, history=history))
        box: list[AgentRun | BaseException] = []

        def target() -> None:
            try:
                box.append(asyncio.run(self.arun(task, history=history)))
            except BaseException as exc:
                box.append(exc)

        worker = threading.Thread(target=target, name="tooldispatch-agent")
        worker.start()
        worker.join()
        result = box[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _parallel_safe(self, name: str) -> bool:
        tool = self.dispatcher.registry.get(name)
        return tool is not None and tool.parallel_safe

    def _decide(self, index: int, kind: str, message: str, notes: list[str]) -> None:
        """Record in the turn's ``notes`` (as ``kind: message``) and show, at once, what was done and why."""
        notes.append(f"{kind}: {message}")
        self._emit(Decided(index, kind, message))

    async def _model_turn(
        self,
        index: int,
        messages: list[dict[str, Any]],
        *,
        tool_choice: str | None = None,
        hold: frozenset[str] = frozenset(),
    ) -> Completion:
        """Stream one turn; ``tool_choice`` overrides the agent's (``none``: no tools and no grammar); calls whose key
        is in ``hold`` never start early."""
        choice = tool_choice or self.tool_choice
        request = ChatRequest(
            messages=list(messages),
            tools=self.tools,
            max_tokens=self.max_tokens,
            tool_choice=choice,
            constrained=self.constrained and choice != "none",
            extra=self.request_extra,
            temperature=self.temperature,
            seed=self.seed,
        )
        started = time.monotonic()
        watcher = (
            StreamParser(self._tool_map, tool_format=self.tool_format, repair=self.repair)
            if self.early_dispatch and self.tolerant_parsing
            else None
        )

        async def observed() -> AsyncIterator[Event]:
            # Once the stream has completed a final_answer call the turn is over: nothing after it runs, so the
            # stream is closed there (the engine stops generating) and no later call starts early.
            stream = self.backend.stream(request)
            try:
                async for event in stream:
                    self._emit(ModelStreamed(index, event))
                    answered = False
                    if watcher is not None and isinstance(event, ContentDelta):
                        for ready in watcher.feed(event.text):
                            if not isinstance(ready, CallReady):
                                continue
                            if self.answer_tool and ready.call.name == ANSWER_TOOL.name:
                                answered = True
                                break
                            if self._parallel_safe(ready.call.name) and (
                                call_key(ready.call.name, ready.call.arguments) not in hold
                            ):
                                self._start_early(index, ready.call)
                    yield event
                    if answered:
                        return
            finally:
                close = getattr(stream, "aclose", None)  # an async generator: stops the engine's request
                if close is not None:
                    await close()

        return await collect(observed(), started=started)

    def _start_early(self, index: int, call: ToolCall) -> None:
        if len(self._early) >= self.budget.max_calls_per_turn:
            return
        task = asyncio.create_task(
            self.dispatcher.adispatch(
                call.name,
                call.arguments,
                session_id=self.session_id,
                trigger=f"model_turn:{index}:early",
                call_id=call.id,
                repairs=call.repairs,
                checked=call.checked,
            )
        )
        self._early.append((call, task))

    async def _drain_early(self) -> None:
        """Let calls started early finish when the final outcome has no use for them (read-only only)."""
        early, self._early = self._early, []
        for _, task in early:
            await task

    async def _dispatch(
        self, index: int, calls: Sequence[ToolCall], completion: Completion, deadline: float | None, notes: list[str]
    ) -> tuple[ToolRun, ...]:
        early, self._early = self._early, []
        results: list[DispatchResult | None] = [None] * len(calls)
        for i, call in enumerate(calls):
            match = next((e for e in early if e[0].name == call.name and e[0].arguments == call.arguments), None)
            if match is not None:
                early.remove(match)
                results[i] = await match[1]
        cap = self.budget.max_calls_per_turn
        for i in range(cap, len(calls)):
            if results[i] is None:
                results[i] = self.dispatcher.refuse(
                    calls[i].name,
                    calls[i].arguments,
                    reason="too_many_calls",
                    message=f"this turn made {len(calls)} calls; at most {cap} run in one turn, so calls "
                    f"{cap + 1} to {len(calls)} were not run",
                    suggestion=f"call again with the calls still needed, at most {cap} per turn",
                    session_id=self.session_id,
                    trigger=f"model_turn:{index}",
                    call_id=calls[i].id,
                )
        rest = [i for i, r in enumerate(results) if r is None]
        if rest:
            outs = await self.dispatcher.adispatch_many(
                [calls[i] for i in rest],
                session_id=self.session_id,
                trigger=f"model_turn:{index}",
                model_latency_s=completion.model_s,
                reasoning_s=completion.reasoning_s,
                stop_when=self._wall_check(deadline),
            )
            for i, out in zip(rest, outs, strict=True):
                results[i] = out
        for _, task in early:  # started early but not in the final outcome: read-only, let it finish
            await task
        runs: list[ToolRun] = []
        for call, result in zip(calls, results, strict=True):
            assert result is not None
            if self.auto_refresh and result.reason == STALE_REASON:
                result = await self._refresh_and_retry(index, call, result, runs, notes)
            run = ToolRun(call=call, result=result, tool_s=float(result.trace.latencies.get("total", 0.0)))
            self._emit(CallDispatched(index, run))
            runs.append(run)
        return tuple(runs)

    def _note_dropped(self, index: int, dropped: Sequence[ToolCall], notes: list[str]) -> None:
        """Say, as they are about to run, which refused calls run without their undeclared keys."""
        for call in dropped:
            keys = ", ".join(json.dumps(r.path.lstrip("/")) for r in call.repairs if r.kind == "drop_key")
            self._decide(
                index,
                "drop_extra_arguments",
                f"{call.name} was refused only for argument(s) its tool does not declare ({keys}); "
                "it runs without them",
                notes,
            )

    def _answer_at(self, calls: Sequence[ToolCall]) -> int | None:
        """The position of the turn's first call to the answer tool (``answer_tool``), or ``None``."""
        if not self.answer_tool:
            return None
        return next((i for i, call in enumerate(calls) if call.name == ANSWER_TOOL.name), None)

    def _refuse_after_answer(self, index: int, calls: Sequence[ToolCall]) -> tuple[ToolRun, ...]:
        """Refuse, without running them, the calls a turn wrote after its final answer (each keeps a trace)."""
        runs = []
        for call in calls:
            result = self.dispatcher.refuse(
                call.name,
                call.arguments,
                reason="after_final_answer",
                message=f"this call came after the {ANSWER_TOOL.name} call that ended the run; it was not run",
                suggestion="make every call before giving the final answer",
                session_id=self.session_id,
                trigger=f"model_turn:{index}",
                call_id=call.id,
            )
            run = ToolRun(call=call, result=result, tool_s=0.0)
            self._emit(CallDispatched(index, run))
            runs.append(run)
        return tuple(runs)

    def _wall_check(self, deadline: float | None) -> Callable[[], str | None] | None:
        """What tells the dispatcher that the wall-time budget ended before a call started."""
        if deadline is None:
            return None
        message = (
            f"the run's wall-time budget ({self.budget.max_wall_s:g} s) ended before this call started; it was not run"
        )
        return lambda: message if time.monotonic() >= deadline else None

    async def _refresh_and_retry(
        self, index: int, call: ToolCall, refused: DispatchResult, runs: list[ToolRun], notes: list[str]
    ) -> DispatchResult:
        """Run the refused call's read-only refresher (recorded in ``runs``), then the call once more."""
        plan = refresher_call(self.dispatcher.registry, call.name, call.arguments)
        if plan is None:
            return refused
        name, args = plan
        self._decide(
            index,
            "auto_refresh",
            f"{call.name} was refused ({STALE_REASON}): running its read-only refresher {name} "
            f"{json.dumps(args, ensure_ascii=False)} first, then {call.name} once more",
            notes,
        )
        refresh = await self.dispatcher.adispatch(name, args, session_id=self.session_id, trigger="auto_refresh")
        run = ToolRun(
            call=ToolCall(name, args, flags=frozenset({"auto_refresh"})),
            result=refresh,
            tool_s=float(refresh.trace.latencies.get("total", 0.0)),
        )
        self._emit(CallDispatched(index, run))
        runs.append(run)
        if not refresh.ok:
            self._decide(index, "auto_refresh", f"{name} failed, so {call.name} stays refused", notes)
            return refused
        self._decide(index, "auto_refresh", f"{name} succeeded: {call.name} once more", notes)
        return await self.dispatcher.adispatch(
            call.name,
            call.arguments,
            session_id=self.session_id,
            trigger=f"model_turn:{index}:after_refresh",
            call_id=call.id,
            repairs=call.repairs,
            checked=call.checked,
        )

    def _answer_refusals(
        self, outcome: ParseOutcome, previous: ParseOutcome | None
    ) -> tuple[list[ToolCall], list[tuple[ToolCall, dict[str, Any]]]]:
        """Split the turn's calls refused for their arguments into calls to run and calls to answer.

        With ``drop_extra_arguments``, a call whose only fault is undeclared keys, to a tool declared
        ``extra_arguments="ignore"``, runs without them. Every other such call is answered with an error
        payload (``agent/feedback.py``). Identical refused calls in one turn are taken once.
        """
        seen: set[str] = set()
        dropped: list[ToolCall] = []
        refused: list[tuple[ToolCall, dict[str, Any]]] = []
        for cand in outcome.rejected:
            key = call_key(cand.name, cand.arguments)
            if not answerable(cand, self._tool_map) or key in seen:
                continue
            seen.add(key)
            spec = self._tool_map[cand.name or ""]
            tool = self.dispatcher.registry.get(spec.name)
            if self.drop_extra_arguments and tool is not None and tool.extra_arguments == "ignore":
                call = without_extra_arguments(cand, spec, _new_call_id())
                if call is not None:
                    dropped.append(call)
                    continue
            written = ToolCall(
                spec.name, dict(cand.arguments or {}), bucket=cand.bucket, stage=cand.stage, id=_new_call_id()
            )
            repeated = repeated_rejection(cand, previous)
            payload = rejection_payload(cand, spec, repeated=repeated, bare_feedback=self.bare_feedback)
            refused.append((written, payload))
        return dropped, refused

    async def _turn(
        self,
        index: int,
        messages: list[dict[str, Any]],
        deadline: float | None,
        *,
        tool_choice: str | None = None,
        hold: frozenset[str] = frozenset(),
    ) -> tuple[Completion | None, EndReason, str | None]:
        """One model turn bounded by the wall-time budget: the completion, or why none came (end and error)."""
        end: EndReason
        error: str | None
        try:
            async with asyncio.timeout_at(_loop_time(deadline)) as turn_timer:
                completion = await self._model_turn(index, messages, tool_choice=tool_choice, hold=hold)
                return completion, "final_answer", None
        except ContextWindowExceeded as exc:  # a budget of its own: the window is full, nothing was generated
            end, error = "context_window", str(exc)
        except BackendError as exc:
            end, error = "backend_error", str(exc)
        except TimeoutError:
            if not turn_timer.expired():
                end, error = "backend_error", "the backend raised TimeoutError"
            else:
                end, error = "wall_time", None
        except Exception as exc:  # a backend that breaks its contract still ends the run with a record
            end, error = "backend_error", f"the backend raised {type(exc).__name__}: {exc}"
        await self._drain_early()
        return None, end, error

    def _parse(self, completion: Completion) -> ParseOutcome:
        # The parser takes the reasoning and the native calls as the backend split them: a call the model
        # put inside its reasoning is still recovered (and flagged ``in_reasoning``).
        return parse_tool_calls(
            completion.content,
            self._tool_map,
            reasoning=completion.reasoning,
            native_calls=completion.native_calls or None,
            finish_reason=completion.finish_reason,
            tool_format=self.tool_format,
            reasoning_open=self.reasoning_open and not completion.reasoning,
            repair=self.repair,
            tolerant=self.tolerant_parsing,
        )

    async def arun(self, task: str, *, history: Sequence[Mapping[str, Any]] = ()) -> AgentRun:
        """Run ``task`` to an end: a final answer, the first budget reached, or no progress (``stuck``).

        The wall-time budget bounds each model turn (a turn still streaming when it runs out is dropped)
        and the dispatch of a turn's calls (calls not started by then are reported as not run).
        ``history`` is an earlier conversation to continue (its system message included); the task is the
        next user message.
        """
        t_start = time.monotonic()
        deadline = t_start + self.budget.max_wall_s if self.budget.max_wall_s is not None else None
        messages: list[dict[str, Any]] = [dict(m) for m in history]
        if self.system_prompt and not messages:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": task})
        turns: list[Turn] = []
        succeeded: dict[str, int] = {}  # each call that succeeded (name and arguments), with its first turn
        answered = Answered(self.dispatcher.registry, polling=self.polling_tools)
        tokens = 0
        end: EndReason = "max_turns"
        final: str | None = None
        answered_by: str | None = None
        stuck: Stuck | None = None
        error: str | None = None
        for index in range(self.budget.max_turns):
            if self.budget.max_wall_s is not None and time.monotonic() - t_start >= self.budget.max_wall_s:
                end = "wall_time"
                break
            if self.budget.max_tokens is not None and tokens >= self.budget.max_tokens:
                end = "max_tokens"
                break
            self._emit(TurnStarted(index))
            guard = self.repeat_guard and self.tool_choice == "auto"  # required/a tool's name: a call every turn
            hold = answered.keys() if guard else frozenset()
            completion, end, error = await self._turn(index, messages, deadline, hold=hold)
            if completion is None:
                break
            end = "max_turns"
            tokens += completion.usage.completion_tokens if completion.usage else 0
            outcome = self._parse(completion)
            self._emit(TurnParsed(index, outcome, completion))
            notes: list[str] = []
            previous = turns[-1].outcome if turns else None
            dropped, refused = self._answer_refusals(outcome, previous)
            calls = [*_unique_ids(outcome.calls), *dropped]
            at = self._answer_at(calls)
            if at and not any(r.result.status == "ok" for t in turns for r in t.tool_runs):  # rests on no result
                refused.append((calls[at], bare(EARLY_ANSWER) if self.bare_feedback else dict(EARLY_ANSWER)))
                calls = [c for c in calls if c.name != ANSWER_TOOL.name]  # its repeats go with it
                at = None
            if at is not None:
                final = str(calls[at].arguments.get("answer", ""))
                self._note_dropped(index, [c for c in calls[:at] if c in dropped], notes)
                runs = await self._dispatch(index, calls[:at], completion, deadline, notes) if at else ()
                await self._drain_early()
                if runs:
                    messages.append(_assistant_message(outcome, calls[:at]))
                    messages.extend(
                        _tool_message(r, bare_feedback=self.bare_feedback)
                        for r in runs
                        if "auto_refresh" not in r.call.flags
                    )
                messages.append({"role": "assistant", "content": final})
                later = [c for c in calls[at + 1 :] if c.name != ANSWER_TOOL.name]  # a repeated answer is no call
                runs = (*runs, *self._refuse_after_answer(index, later))
                turns.append(Turn(index, completion, outcome, runs, notes=tuple(notes)))
                end, answered_by = "final_answer", "answer_tool"
                break
            attempts = [*calls, *refused_attempts(outcome, self._tool_map)]
            held = answered.held(attempts) if guard and attempts and not refused else ()
            if held:
                await self._drain_early()
                self._decide(index, "repeat_guard", held_note(held), notes)
                turns.append(Turn(index, completion, outcome, notes=tuple(notes), held=held))
                self._emit(TurnStarted(index + 1))
                again, end, error = await self._turn(index + 1, messages, deadline, tool_choice="none")
                if again is None:
                    break
                tokens += again.usage.completion_tokens if again.usage else 0
                answer_outcome = self._parse(again)
                self._emit(TurnParsed(index + 1, answer_outcome, again))
                turns.append(Turn(index + 1, again, answer_outcome, tools_disabled=True))
                final = answer_text(answer_outcome)
                if final is not None:  # like a text answer, it is not in ``messages`` (RunRecord.conversation adds it)
                    end, answered_by = "final_answer", "repeat_guard"
                else:
                    end = "stuck"
                    stuck = Stuck("no_answer_without_tools", (index, index + 1), _short(again.content))
                    self._emit(Decided(index + 1, "stuck", stuck.describe()))
                break
            if calls or refused:
                self._note_dropped(index, dropped, notes)
                messages.append(_assistant_message(outcome, [*calls, *(call for call, _ in refused)]))
                runs = await self._dispatch(index, calls, completion, deadline, notes) if calls else ()
                for tool_run in runs:
                    if "auto_refresh" in tool_run.call.flags:  # the dispatcher's own call: no model call to answer
                        continue
                    key = call_key(tool_run.call.name, tool_run.call.arguments)
                    repeat = succeeded.get(key) if self.answer_tool and tool_run.result.status == "ok" else None
                    messages.append(_tool_message(tool_run, repeat, bare_feedback=self.bare_feedback))
                    if tool_run.result.status == "ok":
                        succeeded.setdefault(key, index)
                answered.record(index, runs)
                answers = [json.dumps(payload, ensure_ascii=False) for _, payload in refused]
                for (call, _), answer in zip(refused, answers, strict=True):
                    messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": answer})
                turns.append(
                    Turn(index, completion, outcome, runs, feedback="\n".join(answers) or None, notes=tuple(notes))
                )
            elif outcome.rejected:
                await self._drain_early()
                feedback = unusable_output_feedback(outcome, previous, bare_feedback=self.bare_feedback)
                messages.append({"role": "assistant", "content": completion.content})
                messages.append({"role": "user", "content": feedback})
                turns.append(Turn(index, completion, outcome, feedback=feedback, notes=tuple(notes)))
            else:
                await self._drain_early()
                turns.append(Turn(index, completion, outcome, notes=tuple(notes)))
                final = outcome.content
                end, answered_by = "final_answer", "model"
                break
            stuck = stuck_evidence(
                turns,
                repeats=self.budget.stuck_repeats,
                idle_turns=self.budget.stuck_idle_turns,
                polling=self.polling_tools,
            )
            if stuck is not None:
                self._emit(Decided(index, "stuck", stuck.describe()))
                end = "stuck"
                break
        wall = time.monotonic() - t_start
        busy = sum(t.model_s for t in turns) + sum(r.tool_s for t in turns for r in t.tool_runs)
        run = AgentRun(
            task=task,
            turns=tuple(turns),
            end=end,
            final_answer=final,
            error=error,
            messages=tuple(messages),
            wall_s=wall,
            overhead_s=max(0.0, wall - busy),
            answered_by=answered_by,
            stuck=stuck,
        )
        self._emit(RunEnded(run))
        return run
