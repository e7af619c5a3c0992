"""The stuck detector: ends a run that makes no progress, with the evidence.

After OpenHands' ``StuckDetector``: a run is stuck when its last turns repeat themselves, in one of four ways,
checked in this order after every turn that does not end the run:

- ``same_rejection``: the same refused call (name, arguments, error) in each of ``repeats`` turns in a row;
- ``same_output``: the same text, with no call run, ``repeats`` turns in a row (a monologue);
- ``same_calls``: the same calls with the same results (action and observation), ``repeats`` turns in a row;
- ``no_new_success``: ``idle_turns`` turns in a row in which no call succeeded that had not succeeded before.

Turns that call a declared polling tool (its result may change between identical calls) are exempt from the
last two: a poll is bounded by the turn budget, not by this detector. The check is a pure function of the turns.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from tooldispatch.agent.records import Stuck, Turn
from tooldispatch.types import ToolCall, call_key


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _calls(turn: Turn) -> tuple[tuple[str, str, str, str], ...]:
    """The turn's model calls (their key, status, result and how the evidence shows them), sorted; the
    dispatcher's own refreshes are left out."""
    return tuple(
        sorted(
            (call_key(r.call.name, r.call.arguments), r.result.status, r.result.content, _shown(r.call))
            for r in turn.tool_runs
            if "auto_refresh" not in r.call.flags
        )
    )


def _shown(call: ToolCall) -> str:
    """A call as the evidence shows it: ``["name", {arguments}]``."""
    return json.dumps([call.name, call.arguments], sort_keys=True, default=str)


def _rejections(turn: Turn) -> set[str]:
    return {call_key(c.name, [c.arguments, c.error]) for c in turn.outcome.rejected if c.name is not None}


def _polls(turn: Turn, polling: Collection[str]) -> bool:
    return any(r.call.name in polling for r in turn.tool_runs)


def _new_successes(turns: Sequence[Turn]) -> list[bool]:
    """For each turn, whether a call succeeded in it that had not succeeded in an earlier turn of the run."""
    seen: set[str] = set()
    out = []
    for turn in turns:
        keys = {
            call_key(r.call.name, r.call.arguments)
            for r in turn.tool_runs
            if r.result.status == "ok" and "auto_refresh" not in r.call.flags
        }
        out.append(bool(keys - seen))
        seen |= keys
    return out


def stuck_evidence(
    turns: Sequence[Turn], *, repeats: int | None, idle_turns: int | None, polling: Collection[str] = ()
) -> Stuck | None:
    """The evidence that the run is stuck after its last turn, or ``None``.

    Args:
        turns: the run's turns so far.
        repeats: turns in a row that must repeat the same thing (``None``: the repeat rules are off).
        idle_turns: turns in a row without a new successful call (``None``: that rule is off).
        polling: tools whose identical calls may return new results; turns calling them are never
            ``same_calls`` or idle.
    """
    if repeats is not None and len(turns) >= repeats:
        last = turns[-repeats:]
        indices = tuple(t.index for t in last)
        common = set.intersection(*(_rejections(t) for t in last))
        if common:
            cand = next(c for c in last[-1].outcome.rejected if call_key(c.name, [c.arguments, c.error]) in common)
            return Stuck("same_rejection", indices, _short(f"{cand.raw.strip()} (refused: {cand.error})"))
        text = last[0].completion.content.strip()
        if text and all(not t.tool_runs and t.completion.content.strip() == text for t in last):
            return Stuck("same_output", indices, _short(text))
        calls = _calls(last[0])
        if calls and not any(_polls(t, polling) for t in last) and all(_calls(t) == calls for t in last):
            what = "; ".join(f"{shown} -> {status}" for _, status, _, shown in calls)
            return Stuck("same_calls", indices, _short(what))
    if idle_turns is not None and len(turns) >= idle_turns:
        last = turns[-idle_turns:]
        fresh = _new_successes(turns)[-idle_turns:]
        if not any(fresh) and not any(_polls(t, polling) for t in last):
            return Stuck(
                "no_new_success", tuple(t.index for t in last), f"{idle_turns} turns without a new successful call"
            )
    return None
