"""One demo run: a task in a freshly seeded world, the real agent loop and dispatcher, scored by the world."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tooldispatch.agent.feedback import DROPPED_FLAG
from tooldispatch.tools.demo._tasks import SYSTEM_PROMPT, DemoTask

if TYPE_CHECKING:
    from tooldispatch.agent import AgentRun
    from tooldispatch.agent.loop import Observer
    from tooldispatch.backends.base import Backend


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """What one demo run did, in the terms the demo reports.

    Attributes:
        seed: the sampling seed of every model turn.
        mode: ``prompt`` (calls written as text, read by the tolerant parser) or ``constrained`` (grammar-bound).
        done: the task's check holds on the world's final state.
        end: why the run stopped (``final_answer``, ``max_turns``, ...).
        model_calls: calls the model wrote that reached the dispatcher.
        auto_refreshes: refreshes the dispatcher ran itself (only with ``auto_refresh``).
        dropped: calls run with undeclared argument keys dropped (only with ``drop_extra_arguments``).
        side_effects: side effects in the world's audit log.
        run: the whole transcript.
    """

    seed: int
    mode: str
    done: bool
    end: str
    model_calls: int
    auto_refreshes: int
    dropped: int
    side_effects: int
    run: AgentRun

    def line(self) -> str:
        """One line for a table of seeds."""
        s = self.run.summary()
        end = self.end
        if self.run.answered_by == "repeat_guard":
            end += f" by the repeat guard ({s['repeat_guard']} call(s) held)"
        if self.run.stuck is not None:
            end += f", {self.run.stuck.describe()}"
        return (
            f"seed {self.seed} {self.mode:11s} task {'done' if self.done else 'not done'} (ended: {end}; "
            f"{len(self.run.turns)} turns, {self.model_calls} model calls, "
            f"{self.auto_refreshes} auto refreshes, {self.dropped} with extra arguments dropped, "
            f"{self.side_effects} side effects)"
        )

    def to_dict(self) -> dict[str, Any]:
        """The outcome and its transcript as JSON-serializable data."""
        return {
            "seed": self.seed,
            "mode": self.mode,
            "done": self.done,
            "end": self.end,
            "model_calls": self.model_calls,
            "auto_refreshes": self.auto_refreshes,
            "dropped": self.dropped,
            "side_effects": self.side_effects,
            "transcript": self.run.to_dict(),
        }


def run_demo_task(
    backend: Backend,
    task: DemoTask,
    *,
    constrained: bool,
    seed: int,
    temperature: float,
    max_turns: int,
    max_tokens: int,
    auto_refresh: bool,
    drop_extra_arguments: bool = False,
    repeat_guard: bool = True,
    stuck_repeats: int | None = 3,
    stuck_idle_turns: int | None = 4,
    observer: Observer | None = None,
    system_prompt: str = SYSTEM_PROMPT,
) -> DemoOutcome:
    """Run ``task`` once in a freshly seeded world (in-memory dispatcher store) and score it.

    Args:
        backend: the model engine.
        task: the demo task.
        constrained: grammar-constrained decoding (``tool_choice`` stays ``auto``: the model may answer).
        seed: sampling seed of every turn.
        temperature: sampling temperature of every turn.
        max_turns: the run's turn budget.
        max_tokens: completion tokens per turn.
        auto_refresh: the dispatcher behaviour ``Agent(auto_refresh=...)``.
        drop_extra_arguments: the dispatcher behaviour ``Agent(drop_extra_arguments=...)``.
        repeat_guard: ``Agent(repeat_guard=...)``.
        stuck_repeats: ``Budget.stuck_repeats``.
        stuck_idle_turns: ``Budget.stuck_idle_turns``.
        observer: the live view, if any.
        system_prompt: the system message.
    """
    from tooldispatch.agent import Agent, Budget
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.tools.demo._registry import build_registry
    from tooldispatch.tools.demo._world import DemoWorld

    world = DemoWorld.seed()
    if task.setup is not None:
        task.setup(world)
    agent = Agent(
        backend=backend,
        dispatcher=Dispatcher(build_registry(world), store=":memory:"),
        budget=Budget(max_turns=max_turns, stuck_repeats=stuck_repeats, stuck_idle_turns=stuck_idle_turns),
        system_prompt=system_prompt,
        max_tokens=max_tokens,
        constrained=constrained,
        observer=observer,
        auto_refresh=auto_refresh,
        drop_extra_arguments=drop_extra_arguments,
        repeat_guard=repeat_guard,
        temperature=temperature,
        seed=seed,
    )
    run = agent.run(task.prompt)
    refreshes = sum(1 for r in run.tool_runs if "auto_refresh" in r.call.flags)
    return DemoOutcome(
        seed=seed,
        mode="constrained" if constrained else "prompt",
        done=bool(task.check(world, run.final_answer or "")),
        end=run.end,
        model_calls=len(run.tool_runs) - refreshes,
        auto_refreshes=refreshes,
        dropped=sum(1 for r in run.tool_runs if DROPPED_FLAG in r.call.flags),
        side_effects=world.count_effects(),
        run=run,
    )
