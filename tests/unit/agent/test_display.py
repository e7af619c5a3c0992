"""The live view shows a run in the order things happened, recorded with rich's recording console."""

from __future__ import annotations

import io
import json
import re
from typing import Any

from rich.console import Console

from tooldispatch.agent import Agent, Budget
from tooldispatch.agent.display import LiveView
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher
from tooldispatch.tools.demo import DemoWorld, build_registry


def _call(name: str, **args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


ASSIGN = _call("assign_driver", driver_id="d-north-1", order_id="o-101")
ASSIGN_WITH_REASON = _call("assign_driver", driver_id="d-north-1", order_id="o-101", reason="on the way")


def _screen(turns: list[str], **agent: Any) -> list[str]:
    """The run's screen as plain lines (no streaming, wide enough that no line wraps)."""
    console = Console(record=True, width=400, force_terminal=False, file=io.StringIO())
    backend = ScriptedBackend([ScriptedTurn(content=t) for t in turns])
    Agent(
        backend=backend,
        dispatcher=Dispatcher(build_registry(DemoWorld.seed())),
        observer=LiveView(console, show_stream=False, summary=False),
        **agent,
    ).run("Assign a north driver to o-101")
    return [line.strip() for line in console.export_text().splitlines() if line.strip()]


def _lines_with(screen: list[str], *starts: str) -> list[str]:
    return [line for line in screen if line.startswith(starts)]


def test_a_dropped_argument_and_a_refresh_show_in_the_order_they_happened() -> None:
    """Turn 1: the parse says the call was rejected, then why it runs anyway, then the refresh it needed, then the
    call; nothing on the screen claims fewer runs than the dispatches below it (clocks blanked as <t>)."""
    screen = _screen([ASSIGN_WITH_REASON, "Assigned."], auto_refresh=True, drop_extra_arguments=True)
    turn_1 = screen[: next(i for i, line in enumerate(screen) if "turn 2" in line)]
    steps = [re.sub(r"\d+\.\d+ (ms|s)", "<t>", s) for s in _lines_with(turn_1, "parsed:", "⟳", "→")]
    assert steps == [
        "parsed: 0 call(s) accepted, 1 rejected, stage none, finish stop, model <t>",
        '⟳ drop_extra_arguments: assign_driver was refused only for argument(s) its tool does not declare ("reason"); '
        "it runs without them",
        "⟳ auto_refresh: assign_driver was refused (stale_state_must_refresh): running its read-only refresher "
        "refresh_drivers {} first, then assign_driver once more",
        "→ dispatch refresh_drivers: ok  <t>",
        "⟳ auto_refresh: refresh_drivers succeeded: assign_driver once more",
        "→ dispatch assign_driver: ok  <t>",
    ]


def test_the_repeat_guard_and_its_answer_are_marked_on_screen() -> None:
    """A held repeat shows the guard's reason, and the next turn is headed as the guard's, with calls disabled."""
    screen = _screen([ASSIGN, ASSIGN, "Assigned."], auto_refresh=True)
    guard = _lines_with(screen, "⟳ repeat_guard")
    assert guard == [
        "⟳ repeat_guard: this turn only repeats calls whose results are already in the conversation (assign_driver "
        "(answered in turn 1)); not dispatched, the turn is generated once more with calls disabled and its text is "
        "the answer"
    ]
    assert any("turn 3: calls disabled, the repeat guard's answer" in line for line in screen)
    assert screen.index(guard[0]) < next(i for i, line in enumerate(screen) if "turn 3" in line)


def test_a_stuck_run_shows_its_evidence_last() -> None:
    """A run ended as stuck says so, with the kind and turns, after the last turn's parse."""
    bad = _call("assign_driver", driver="d-north-1")
    screen = _screen([bad, bad, bad], budget=Budget(max_turns=6))
    stuck = _lines_with(screen, "⟳ stuck")
    assert len(stuck) == 1
    assert stuck[0].startswith(f"⟳ stuck: same_rejection in turns 1, 2, 3: {bad} (refused: assign_driver:")
    assert screen[-1] == stuck[0]


def test_a_held_call_is_never_announced_as_running() -> None:
    """A repeat written with an undeclared key is held by the guard: no line says it runs without the key."""
    screen = _screen([ASSIGN, ASSIGN_WITH_REASON, "Assigned."], auto_refresh=True, drop_extra_arguments=True)
    turn_2 = screen[next(i for i, line in enumerate(screen) if "turn 2" in line) :]
    assert [line.split(":")[0] for line in _lines_with(turn_2, "⟳", "→")] == ["⟳ repeat_guard"]
