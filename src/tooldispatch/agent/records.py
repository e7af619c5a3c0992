"""What an agent run leaves behind: turns, tool runs, clocks, and how the run ended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.backends.base import Completion
from tooldispatch.dispatch import DispatchResult
from tooldispatch.errors import ConfigError
from tooldispatch.types import ParseOutcome, ToolCall

EndReason = Literal[
    "final_answer", "max_turns", "max_tokens", "wall_time", "context_window", "backend_error", "no_progress"
]
"""Why a run stopped. Only ``final_answer`` means the model finished on its own."""


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on one run; the first one reached ends it.

    Attributes:
        max_turns: model turns.
        max_tokens: completion tokens over all turns (``None``: unlimited).
        max_wall_s: wall-clock seconds for the whole run (``None``: unlimited). It bounds model turns
            and dispatch inside a turn too: a call not started when it runs out is reported as not run.
        max_calls_per_turn: calls run from one model turn; the excess is rejected, not run, with feedback.
    """

    max_turns: int = 6
    max_tokens: int | None = None
    max_wall_s: float | None = None
    max_calls_per_turn: int = 32

    def __post_init__(self) -> None:
        if self.max_calls_per_turn < 1:
            raise ConfigError("Budget.max_calls_per_turn must be at least 1")


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
    """

    index: int
    completion: Completion
    outcome: ParseOutcome
    tool_runs: tuple[ToolRun, ...] = ()
    feedback: str | None = None

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
    """

    task: str
    turns: tuple[Turn, ...]
    end: EndReason
    final_answer: str | None
    error: str | None
    messages: tuple[dict[str, Any], ...]
    wall_s: float
    overhead_s: float

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
            "final_answer": self.final_answer,
            "error": self.error,
            "summary": self.summary(),
            "turns": [t.to_dict() for t in self.turns],
            "messages": list(self.messages),
        }
