"""The repeat guard: a turn whose calls only repeat calls already answered is not dispatched.

Small models often call the same tool with the same arguments again after its result came back, until a budget
ends the run. With ``Agent(repeat_guard=True)``, when every call of a turn repeats (same name, same canonical
arguments: ``call_key``) a call whose result is already in the conversation since the user's message, none of them
is dispatched; the turn is generated once more with calls disabled (``tool_choice="none"``) and that text is the
run's final answer, marked ``answered_by="repeat_guard"``. A rejected candidate that names an offered tool with
readable arguments (``refused_attempts``: a side-effecting call found in running text, as when the model writes a
done call again followed by a made-up result) counts as a call here: it never runs, and a turn of such repeats gets
the same answer without tools instead of feedback.

What counts as answered: a call whose result was ``ok``. An answer goes stale, and the call may run again, when
the world may have changed since: a read-only call's result after any later successful side-effecting call, and a
side-effecting call's result after a successful call to its declared compensation (``compensate``). Tools whose
identical calls are expected to return new results (polling a status) are declared with ``polling_tools``; their
calls are never held.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from tooldispatch.agent.records import Held, ToolRun
from tooldispatch.dispatch import Registry
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import ParseOutcome, ToolCall, call_key


class Answered:
    """The calls whose results the conversation holds since the user's message, with the turn of each (one run).

    Args:
        registry: the tools' metadata (``read_only``, ``compensate``).
        polling: tools whose repeated calls are expected; never held.
    """

    def __init__(self, registry: Registry, *, polling: Collection[str] = ()) -> None:
        self._registry = registry
        self._polling = frozenset(polling)
        self._turns: dict[str, int] = {}
        self._names: dict[str, str] = {}

    def keys(self) -> frozenset[str]:
        """The identity keys of the answered calls."""
        return frozenset(self._turns)

    def record(self, index: int, runs: Sequence[ToolRun]) -> None:
        """Take a turn's tool runs, in order: successes become answered, and make earlier answers stale."""
        for run in runs:
            if "auto_refresh" in run.call.flags or run.result.status != "ok":
                continue
            tool = self._registry.get(run.call.name)
            if tool is None or tool.read_only is not True:
                stale = {
                    key
                    for key, name in self._names.items()
                    if self._read_only(name) or self._compensation(name) == run.call.name
                }
                for key in stale:
                    del self._turns[key], self._names[key]
            key = call_key(run.call.name, run.call.arguments)
            self._turns.setdefault(key, index)
            self._names[key] = run.call.name

    def held(self, calls: Sequence[ToolCall]) -> tuple[Held, ...]:
        """Every call of the turn as ``Held`` when each repeats an answered call; ``()`` when any does not."""
        out = []
        for call in calls:
            turn = self._turns.get(call_key(call.name, call.arguments))
            if turn is None or call.name in self._polling:
                return ()
            out.append(Held(call, turn))
        return tuple(out)

    def _read_only(self, name: str) -> bool:
        tool = self._registry.get(name)
        return tool is not None and tool.read_only is True

    def _compensation(self, name: str) -> str | None:
        tool = self._registry.get(name)
        return tool.compensate if tool is not None else None


def refused_attempts(outcome: ParseOutcome, tools: Mapping[str, ToolSpec]) -> list[ToolCall]:
    """The turn's rejected candidates that name an offered tool with readable arguments and are not refused for
    those arguments (a side-effecting call in running text, a call followed by a made-up result): calls the model
    meant, which the parser would not run. A turn of such repeats is held like a turn of accepted repeats."""
    return [
        ToolCall(cand.name, dict(cand.arguments), bucket=cand.bucket, stage=cand.stage, format=cand.format)
        for cand in outcome.rejected
        if cand.name is not None
        and cand.name in tools
        and isinstance(cand.arguments, dict)
        and cand.bucket != "SchemaMismatch"
    ]


def answer_text(outcome: ParseOutcome) -> str | None:
    """The answer in a turn generated with calls disabled: its text when it holds no call and no call attempt, else
    ``None``. A rejected attempt counts: the 0.5B, asked without tools, wrote the done call again followed by made-up
    results, which is no answer."""
    if outcome.calls or outcome.rejected:
        return None
    text = outcome.content.strip()
    return text or None


def held_note(held: Sequence[Held]) -> str:
    """What the live view and the transcript say when the guard holds a turn's calls."""
    calls = ", ".join(f"{h.call.name} (answered in turn {h.answered_in + 1})" for h in held)
    return (
        f"this turn only repeats calls whose results are already in the conversation ({calls}); "
        "not dispatched, the turn is generated once more with calls disabled and its text is the answer"
    )
