"""A live terminal view of an agent run, fed by the loop's observer events (``rich``)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tooldispatch.agent.loop import (
    AgentEvent,
    CallDispatched,
    Decided,
    ModelStreamed,
    RunEnded,
    TurnParsed,
    TurnStarted,
)
from tooldispatch.agent.records import AgentRun
from tooldispatch.backends.base import Completion, ContentDelta, ReasoningDelta, ReasoningEnd
from tooldispatch.types import Candidate, ParseOutcome

_BUCKET_STYLE = {
    "ok_strict": "green",
    "ok_fallback": "green",
    "repaired": "yellow",
}


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _candidate_line(cand: Candidate) -> Text:
    style = _BUCKET_STYLE.get(cand.bucket, "red")
    line = Text("  ◆ ", style=style)
    line.append(f"{cand.name or '?'}", style="bold")
    if cand.arguments is not None:
        line.append(f" {_short(cand.arguments)}")
    line.append(f"  [{cand.bucket} · {cand.stage} · {cand.format}]", style=style)
    for flag in sorted(cand.flags):
        line.append(f" {flag}", style="magenta")
    for rep in cand.repairs:
        line.append(
            f"\n      repaired {rep.kind} {rep.path or '(name)'}: {rep.before!r} → {rep.after!r}", style="yellow"
        )
        if rep.distance:
            line.append(f" (distance {rep.distance})", style="yellow")
    if cand.error and not cand.accepted:
        line.append(f"\n      rejected: {cand.error}", style="red")
    return line


def _refusal_lines(content: str) -> Text | None:
    """A refused or failed call's message and suggestion, in full (the lines the model needs), or ``None``."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict) or not ("message" in data or "suggestion" in data):
        return None
    out = Text()
    if data.get("message"):
        out.append(f"\n      message: {data['message']}", style="red")
    if data.get("suggestion"):
        out.append(f"\n      suggestion: {data['suggestion']}", style="yellow")
    if data.get("approval_id"):
        out.append(f"\n      approval id: {data['approval_id']}", style="yellow")
    return out


_DECISION_STYLE = {"stuck": "bold red", "repeat_guard": "bold yellow"}


def parsed_line(outcome: ParseOutcome, completion: Completion) -> Text:
    """The head line of a parsed turn: calls accepted and rejected, the parse stage, finish and model time."""
    rejected = len(outcome.rejected)
    head = Text(f"parsed: {len(outcome.calls)} call(s) accepted", style="cyan")
    if rejected:
        head.append(f", {rejected} rejected", style="red")
    head.append(f", stage {outcome.stage}", style="cyan")
    head.append(f", finish {completion.finish_reason}", style="dim")
    head.append(f", model {completion.model_s:.2f} s", style="dim")
    if completion.reasoning_s:
        head.append(f", reasoning {completion.reasoning_s:.2f} s", style="dim")
    return head


class LiveView:
    """Prints a run as it happens, in the order it happens: a spinner while the model reads the prompt,
    reasoning dimmed, content, the parse (calls accepted and rejected, each candidate with its stage and
    repairs), what was done on the model's behalf and why at the moment it was done (a refused call run
    without undeclared keys, a refresh before a retry, calls held by the repeat guard, a stuck run ended),
    each dispatch with its status and time (a refusal's message and suggestion in full), and a summary at
    the end (``summary=False`` leaves it out)."""

    def __init__(self, console: Console | None = None, *, show_stream: bool = True, summary: bool = True) -> None:
        self.console = console or Console(highlight=False)
        self.show_stream = show_stream
        self.summary = summary
        self._in_reasoning = False
        self._status: Any = None
        self._guarded = False  # the next turn is the repeat guard's, generated with calls disabled

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __call__(self, event: AgentEvent) -> None:
        c = self.console
        if not isinstance(event, TurnStarted):
            self._stop_spinner()
        if isinstance(event, TurnStarted):
            if self._guarded:
                c.rule(f"turn {event.index + 1}: calls disabled, the repeat guard's answer", style="yellow")
            else:
                c.rule(f"turn {event.index + 1}", style="dim")
            self._guarded = False
            if c.is_terminal:
                self._status = c.status("the model is reading the prompt…", spinner="dots")
                self._status.start()
        elif isinstance(event, ModelStreamed) and self.show_stream:
            ev = event.event
            if isinstance(ev, ReasoningDelta):
                self._in_reasoning = True
                c.print(Text(ev.text, style="dim italic"), end="")
            elif isinstance(ev, ReasoningEnd) and self._in_reasoning:
                self._in_reasoning = False
                c.print()
            elif isinstance(ev, ContentDelta):
                c.print(Text(ev.text), end="")
        elif isinstance(event, TurnParsed):
            c.print()
            c.print(parsed_line(event.outcome, event.completion))
            for cand in event.outcome.candidates:
                c.print(_candidate_line(cand))
        elif isinstance(event, Decided):
            self._guarded = event.kind == "repeat_guard"
            line = Text(f"  ⟳ {event.kind}: ", style=_DECISION_STYLE.get(event.kind, "magenta"))
            line.append(event.message, style=_DECISION_STYLE.get(event.kind, "magenta"))
            c.print(line)
        elif isinstance(event, CallDispatched):
            r = event.run.result
            style = {"ok": "green", "awaiting_approval": "yellow"}.get(r.status, "red")
            line = Text("  → dispatch ", style="dim")
            line.append(event.run.call.name, style="bold")
            line.append(f": {r.status}", style=style)
            if r.reason:
                line.append(f" ({r.reason})", style=style)
            line.append(f"  {event.run.tool_s * 1000:.1f} ms", style="dim")
            refusal = _refusal_lines(r.content) if r.status != "ok" else None
            if refusal is not None:
                line.append(refusal)
            else:
                line.append(f"\n      {_short(r.content, 240)}", style="dim")
            c.print(line)
        elif isinstance(event, RunEnded):
            c.print()
            if self.summary:
                c.print(summary_table(event.run))


def summary_table(run: AgentRun) -> Table:
    """A one-screen summary of a run: how it ended, what the parser and the dispatcher did, clocks."""
    s = run.summary()
    table = Table(title="run summary", show_header=False, title_style="bold")
    table.add_column("what", style="bold")
    table.add_column("value")
    ended = f"{s['end']}" + (f": {run.error}" if run.error else "")
    if run.stuck is not None:
        ended += f": {run.stuck.describe()}"
    if run.answered_by == "repeat_guard":
        ended += " (the answer was generated with calls disabled, by the repeat guard: not the model's first choice)"
    table.add_row("ended", ended)
    table.add_row("turns", str(s["turns"]))
    table.add_row("call candidates", str(s["candidates"]))
    table.add_row("by bucket", ", ".join(f"{k} {v}" for k, v in sorted(s["buckets"].items())) or "none")
    table.add_row("repairs applied", str(s["repairs"]))
    table.add_row("dispatch", ", ".join(f"{k} {v}" for k, v in sorted(s["dispatch"].items())) or "nothing ran")
    if s["repeat_guard"]:
        table.add_row("held by the repeat guard", f"{s['repeat_guard']} call(s), not dispatched")
    if s["by_dispatcher"]:
        table.add_row("by switches", ", ".join(f"{k} {v}" for k, v in sorted(s["by_dispatcher"].items())))
    table.add_row("model time", f"{s['model_s']:.2f} s (reasoning {s['reasoning_s']:.2f} s)")
    table.add_row("tool time", f"{s['tool_s']:.3f} s")
    table.add_row("loop overhead", f"{s['overhead_s'] * 1000:.1f} ms of {s['wall_s']:.2f} s wall")
    if run.final_answer:
        table.add_row("final answer", _short(run.final_answer, 300))
    return table
