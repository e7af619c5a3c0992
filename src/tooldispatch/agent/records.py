"""What an agent run leaves behind: turns, tool runs, clocks, and how the run ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.backends.base import Completion
from tooldispatch.dispatch import DispatchResult
from tooldispatch.errors import ConfigError
from tooldispatch.types import ParseOutcome, ToolCall

EndReason = Literal["final_answer", "max_turns", "max_tokens", "wall_time", "context_window", "backend_error", "stuck"]
"""Why a run stopped. Only ``final_answer`` means the model finished (``AgentRun.answered_by`` says how);
``stuck``: the run made no progress (``AgentRun.stuck`` holds the evidence, ``agent/stuck.py``)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on one run; the first one reached ends it.

    Attributes:
        max_turns: model turns.
        max_tokens: completion tokens over all turns (``None``: unlimited).
        max_wall_s: wall-clock seconds for the whole run (``None``: unlimited). It bounds model turns
            and dispatch inside a turn too: a call not started when it runs out is reported as not run.
        max_calls_per_turn: calls run from one model turn; the excess is rejected, not run, with feedback.
        stuck_repeats: end the run as ``stuck`` when this many turns in a row write the same output, the same
            rejected call, or the same calls with the same results (``None``: never).
        stuck_idle_turns: end the run as ``stuck`` after this many turns in a row without a new successful call
            (``None``: never).
    """

    max_turns: int = 6
    max_tokens: int | None = None
    max_wall_s: float | None = None
    max_calls_per_turn: int = 32
    stuck_repeats: int | None = 3
    stuck_idle_turns: int | None = 4

    def __post_init__(self) -> None:
        if self.max_calls_per_turn < 1:
            raise ConfigError("Budget.max_calls_per_turn must be at least 1")
        if self.stuck_repeats is not None and self.stuck_repeats < 2:
            raise ConfigError("Budget.stuck_repeats must be at least 2 (a repeat needs two turns), or None for never")
        if self.stuck_idle_turns is not None and self.stuck_idle_turns < 1:
            raise ConfigError("Budget.stuck_idle_turns must be at least 1, or None for never")


@dataclass(frozen=True, slots=True)
class Stuck:
    """Why a run was ended as ``stuck``: what repeated, and in which turns.

    Attributes:
        kind: ``same_output`` (the same text), ``same_rejection`` (the same refused call), ``same_calls`` (the same
            calls with the same results), ``no_new_success`` (no call succeeded that had not succeeded before) or
            ``no_answer_without_tools`` (the repeat guard's answer without tools was again a call).
        turns: the 0-based turns that make the evidence.
        what: the repeated thing, in words (the text, the call, the calls).
    """

    kind: str
    turns: tuple[int, ...]
    what: str

    def describe(self) -> str:
        """One line for the live view and ``logs``: the kind, the turns (1-based) and what repeated."""
        turns = ", ".join(str(t + 1) for t in self.turns)
        return f"{self.kind} in turns {turns}: {self.what}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {"kind": self.kind, "turns": list(self.turns), "what": self.what}


@dataclass(frozen=True, slots=True)
class Held:
    """A call the repeat guard did not dispatch: it repeats a call whose result is already in the conversation.

    Attributes:
        call: the call as the model wrote it.
        answered_in: the 0-based turn whose identical call's result the conversation holds.
    """

    call: ToolCall
    answered_in: int

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {"call": self.call.to_dict(), "answered_in": self.answered_in}


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One call the loop dispatched and what came back.

    Attributes:
        call: the parsed call.
        result: the dispatcher's result (``status``, ``reason``, ``content``, ``trace``).
        tool_s: the dispatcher's total seconds for the call (admission, the tool's attempts, bounding).
    """

    call: ToolCall
    result: DispatchResult
    tool_s: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "call": self.call.to_dict(),
            "status": self.result.status,
            "reason": self.result.reason,
            "content": self.result.content,
            "tool_s": round(self.tool_s, 6),
            "trace": self.result.trace.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Turn:
    """One model turn and the calls it led to.

    Attributes:
        index: 0-based turn number.
        completion: the collected model output with its timestamps.
        outcome: what the parser made of it.
        tool_runs: the calls dispatched after this turn, in order.
        feedback: the message sent back when the output held call attempts that could not be used.
        notes: what the agent or the dispatcher did on the model's behalf in this turn, and why, in order.
        held: the calls the repeat guard did not dispatch (each repeats a call already answered).
        tools_disabled: the turn was generated with calls disabled (``tool_choice="none"``), by the repeat guard.
    """

    index: int
    completion: Completion
    outcome: ParseOutcome
    tool_runs: tuple[ToolRun, ...] = ()
    feedback: str | None = None
    notes: tuple[str, ...] = ()
    held: tuple[Held, ...] = ()
    tools_disabled: bool = False

    @property
    def model_s(self) -> float:
        """Seconds the model took for this turn."""
        return self.completion.model_s

    @property
    def reasoning_s(self) -> float:
        """Seconds from the first reasoning token to the end of reasoning."""
        return self.completion.reasoning_s

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        c = self.completion
        return {
            "index": self.index,
            "content": c.content,
            "reasoning": c.reasoning,
            "finish_reason": c.finish_reason,
            "native_calls": [{"name": n.name, "arguments": n.arguments} for n in c.native_calls],
            "model_s": round(self.model_s, 6),
            "reasoning_s": round(self.reasoning_s, 6),
            "usage": (
                {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens}
                if c.usage
                else None
            ),
            "parse": self.outcome.to_dict(),
            "tool_runs": [r.to_dict() for r in self.tool_runs],
            "feedback": self.feedback,
            "notes": list(self.notes),
            "held": [h.to_dict() for h in self.held],
            "tools_disabled": self.tools_disabled,
        }


@dataclass(frozen=True, slots=True)
class AgentRun:
    """A whole run.

    Attributes:
        task: the user's task.
        turns: every model turn.
        end: why the run stopped.
        final_answer: the model's final text when it finished on its own.
        error: the backend error message when ``end == "backend_error"``; what did not fit when
            ``end == "context_window"`` (the next prompt plus the turn's completion budget).
        messages: the full conversation as sent to the model.
        wall_s: seconds for the whole run.
        overhead_s: seconds the loop itself spent outside model turns and tool runs.
        answered_by: with ``end == "final_answer"``, where the answer came from: ``model`` (text the model chose
            to write), ``answer_tool`` (its ``final_answer`` call) or ``repeat_guard`` (the turn generated again
            with calls disabled, after the model only repeated answered calls; not the model's first choice).
        stuck: with ``end == "stuck"``, the evidence.
    """

    task: str
    turns: tuple[Turn, ...]
    end: EndReason
    final_answer: str | None
    error: str | None
    messages: tuple[dict[str, Any], ...]
    wall_s: float
    overhead_s: float
    answered_by: str | None = None
    stuck: Stuck | None = None

    @property
    def tool_runs(self) -> tuple[ToolRun, ...]:
        """Every dispatched call, in order."""
        return tuple(r for t in self.turns for r in t.tool_runs)

    def summary(self) -> dict[str, Any]:
        """Counts and clocks for a one-screen summary."""
        runs = self.tool_runs
        candidates = [c for t in self.turns for c in t.outcome.candidates]
        buckets: dict[str, int] = {}
        for cand in candidates:
            buckets[cand.bucket] = buckets.get(cand.bucket, 0) + 1
        statuses: dict[str, int] = {}
        for r in runs:
            statuses[r.result.status] = statuses.get(r.result.status, 0) + 1
        return {
            "end": self.end,
            "answered_by": self.answered_by,
            "stuck": self.stuck.describe() if self.stuck else None,
            "repeat_guard": sum(len(t.held) for t in self.turns),
            "turns": len(self.turns),
            "calls_parsed": sum(len(t.outcome.calls) for t in self.turns),
            "candidates": len(candidates),
            "buckets": buckets,
            "repairs": sum(len(c.repairs) for t in self.turns for c in t.outcome.calls),
            "dispatch": statuses,
            "by_dispatcher": {
                flag: sum(1 for r in runs if flag in r.call.flags)
                for flag in ("auto_refresh", "dropped_extra_arguments")
                if any(flag in r.call.flags for r in runs)
            },
            "model_s": round(sum(t.model_s for t in self.turns), 3),
            "reasoning_s": round(sum(t.reasoning_s for t in self.turns), 3),
            "tool_s": round(sum(r.tool_s for r in runs), 3),
            "wall_s": round(self.wall_s, 3),
            "overhead_s": round(self.overhead_s, 6),
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the whole transcript, with traces, as JSON-serializable data."""
        return {
            "task": self.task,
            "end": self.end,
            "answered_by": self.answered_by,
            "stuck": self.stuck.to_dict() if self.stuck else None,
            "final_answer": self.final_answer,
            "error": self.error,
            "summary": self.summary(),
            "turns": [t.to_dict() for t in self.turns],
            "messages": list(self.messages),
        }
