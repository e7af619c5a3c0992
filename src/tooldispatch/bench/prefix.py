"""``tooldispatch bench prefix``: what an interleaved request costs a long conversation's next turn.

Two scenarios, each run against every target side by side in one process:

* **interleaved**: conversation A's first turn (a long system prompt, as agent clients send: about 4,000
  tokens), A's second turn right after it, B (a short title request from another conversation), then A's
  second turn again. The figure is the ratio *A turn 2 after B / A turn 2 right after*: 1 when nothing
  was lost, the whole prefill when B threw A's context away.
* **round robin**: three conversations' first turns in turn, then their second turns in the same order, so
  every second turn follows two other conversations.

Targets: the in-process llama.cpp backend without the prefix cache (``prefix_cache_mb=0``, only the last
request's prefix is reused), with it (the default bound or the one given), and optionally an
OpenAI-compatible server such as llama-server. Every request is greedy with a small completion budget, so the
times are prefill times; second turns carry the first turn's actual answer. Speed targets live here, never in
tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.backends.base import Backend, ChatRequest, ContentDelta, Usage

TARGET_RATIO = 2.0
"""In process with the default bound, A's second turn after B takes at most this many times the one right
after A's first turn."""

_FILLER_TOOLS = (
    ("read_file", "Read a file of the workspace and return its text with line numbers."),
    ("write_file", "Write text to a file of the workspace, creating folders as needed."),
    ("edit_file", "Replace one exact span of a file with new text; fails when the span is not unique."),
    ("list_dir", "List the entries of a folder with their sizes and kinds."),
    ("grep", "Search the workspace for a regular expression and return matching lines."),
    ("run_shell", "Run a shell command in the workspace with a timeout and return its output."),
    ("web_fetch", "Fetch a URL and return its text content, truncated to a budget."),
    ("todo_write", "Replace the task list with the given items and their states."),
)


def system_prompt(approx_tokens: int, *, topic: str) -> str:
    """A deterministic agent-style system prompt of roughly ``approx_tokens`` tokens (tool docs, rules)."""
    lines = [f"You are a coding agent working on {topic}. Follow the rules and use the tools below.", ""]
    i = 0
    while len(" ".join(lines)) < approx_tokens * 4:
        name, doc = _FILLER_TOOLS[i % len(_FILLER_TOOLS)]
        lines.append(
            f"Tool {name}_{i}: {doc} Parameters: path (string, required), limit (integer, default {10 + i}), "
            f"mode (one of fast, careful; default careful). Rule {i}: never call {name}_{i} twice with the same "
            "arguments; prefer the narrowest tool."
        )
        i += 1
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation's first two user turns and its system prompt."""

    name: str
    system: str
    first: str
    second: str


@dataclass(slots=True)
class Step:
    """One request of a scenario: which conversation, which turn, and its label."""

    label: str
    conversation: str
    turn: int


@dataclass(frozen=True, slots=True)
class Scenario:
    """Requests in order, and the two steps whose ratio is the scenario's figure."""

    name: str
    conversations: tuple[Conversation, ...]
    steps: tuple[Step, ...]
    ratio: tuple[str, str] | None
    """``(numerator step label, denominator step label)``."""


def scenarios(*, long_tokens: int = 4000, round_robin_tokens: int = 1500) -> list[Scenario]:
    """The interleaved scenario and the three-conversation round robin."""
    a = Conversation(
        "A", system_prompt(long_tokens, topic="a billing service"), "List the files you would read first.", "Why?"
    )
    b = Conversation("B", "Write a short title for the conversation.", "User: fix the login bug", "Shorter.")
    interleaved = Scenario(
        "interleaved",
        (a, b),
        (
            Step("A turn 1", "A", 1),
            Step("A turn 2, right after", "A", 2),
            Step("B, a title request", "B", 1),
            Step("A turn 2 again, after B", "A", 2),
        ),
        ("A turn 2 again, after B", "A turn 2, right after"),
    )
    rr = tuple(
        Conversation(n, system_prompt(round_robin_tokens, topic=t), "Plan the first step.", "Go on.")
        for n, t in (("X", "a parser"), ("Y", "a scheduler"), ("Z", "a storage layer"))
    )
    steps = tuple(Step(f"{c.name} turn 1", c.name, 1) for c in rr) + tuple(
        Step(f"{c.name} turn 2", c.name, 2) for c in rr
    )
    return [interleaved, Scenario("round robin", rr, steps, None)]


@dataclass(slots=True)
class Timing:
    """One request's measurement."""

    label: str
    seconds: float
    prompt_tokens: int
    text: str


@dataclass(slots=True)
class TargetResult:
    """One target's timings per scenario, and what its prefix cache held."""

    target: str
    timings: dict[str, list[Timing]] = field(default_factory=dict)
    cache: dict[str, int] | None = None

    def merge(self, other: TargetResult) -> None:
        """Add another run's scenarios; cache counters add up, the peak is the larger."""
        self.timings.update(other.timings)
        if other.cache is None:
            return
        mine = self.cache or {"limit_bytes": other.cache["limit_bytes"], "peak_bytes": 0, "restores": 0, "saves": 0}
        self.cache = {
            "limit_bytes": other.cache["limit_bytes"],
            "peak_bytes": max(mine["peak_bytes"], other.cache["peak_bytes"]),
            "restores": mine["restores"] + other.cache["restores"],
            "saves": mine["saves"] + other.cache["saves"],
        }


async def _ask(backend: Backend, messages: Sequence[dict[str, Any]], max_tokens: int) -> tuple[float, int, str]:
    request = ChatRequest(messages=list(messages), max_tokens=max_tokens, temperature=0.0, seed=0)
    parts: list[str] = []
    prompt_tokens = 0
    start = time.perf_counter()
    async for event in backend.stream(request):
        if isinstance(event, ContentDelta):
            parts.append(event.text)
        elif isinstance(event, Usage):
            prompt_tokens = event.prompt_tokens
    return time.perf_counter() - start, prompt_tokens, "".join(parts)


async def run_scenario(
    backend: Backend, scenario: Scenario, *, max_tokens: int = 8, on_request: Callable[[Timing], None] | None = None
) -> list[Timing]:
    """Send the scenario's requests in order; second turns carry the first turn's answer.

    ``on_request`` sees each request's timing as soon as it is done (for progress output).
    """
    convs = {c.name: c for c in scenario.conversations}
    answers: dict[str, str] = {}
    out: list[Timing] = []
    for step in scenario.steps:
        c = convs[step.conversation]
        messages: list[dict[str, Any]] = [{"role": "system", "content": c.system}, {"role": "user", "content": c.first}]
        if step.turn == 2:
            messages += [
                {"role": "assistant", "content": answers.get(c.name, "")},
                {"role": "user", "content": c.second},
            ]
        seconds, prompt_tokens, text = await _ask(backend, messages, max_tokens)
        if step.turn == 1:
            answers[c.name] = text
        out.append(Timing(step.label, seconds, prompt_tokens, text))
        if on_request is not None:
            on_request(out[-1])
    return out


def ratio(scenario: Scenario, timings: Sequence[Timing]) -> float | None:
    """The scenario's figure for one target (``None`` when it has none)."""
    if scenario.ratio is None:
        return None
    by = {t.label: t.seconds for t in timings}
    return by[scenario.ratio[0]] / by[scenario.ratio[1]]


def run_target(
    name: str,
    make: Callable[[], Backend],
    chosen: Sequence[Scenario],
    *,
    max_tokens: int,
    on_request: Callable[[Timing], None] | None = None,
) -> TargetResult:
    """Build one target, run every scenario on it (each on a fresh backend), and keep its cache's counters."""
    result = TargetResult(name)
    peak = 0
    cache: dict[str, int] | None = None
    for scenario in chosen:
        backend = make()
        try:
            result.timings[scenario.name] = asyncio.run(
                run_scenario(backend, scenario, max_tokens=max_tokens, on_request=on_request)
            )
            prefix_cache = getattr(backend, "prefix_cache", None)  # only the in-process backend has one
            if prefix_cache is not None:
                stats = prefix_cache.stats()
                peak = max(peak, stats.peak_bytes)
                cache = {
                    "limit_bytes": stats.limit_bytes,
                    "peak_bytes": peak,
                    "restores": (cache or {}).get("restores", 0) + stats.restores,
                    "saves": (cache or {}).get("saves", 0) + stats.saves,
                }
        finally:
            close = getattr(backend, "close", None)
            if callable(close):
                close()
    result.cache = cache
    return result
