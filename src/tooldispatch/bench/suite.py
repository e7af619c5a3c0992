"""The project's own suite: multi-turn tasks in the demo logistics world, scored by the world's final state.

Each (cell, task) gets a freshly seeded world, the real agent loop (``tooldispatch.agent.Agent``) with the
real dispatcher, and the cell's backend. The task passes when its check on the final world state holds;
parse buckets are counted over every turn. Results go to the same ``bench.db`` as BFCL runs (case ids
``suite:<task>``), so an interrupted suite resumes the same way.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tooldispatch.backends.base import Backend
from tooldispatch.bench.corpus import CORPUS_NAME, Cell, OutputRecord, write_corpus
from tooldispatch.bench.cuts import (
    CUTS,
    FULL,
    Cut,
    paired_cuts,
    paired_totals,
    render_paired_cuts,
    render_paired_totals,
)
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import Target
from tooldispatch.bench.stats import Rate, exact_rate, pass_hat_k
from tooldispatch.bench.targets import MatrixSpec
from tooldispatch.errors import BackendError, ConfigError
from tooldispatch.types import ACCEPTED_BUCKETS

SUITE_PREFIX = "suite:"
SUITE_CATEGORY = "demo-world suite"
"""The suite's category in the table of cuts."""


@dataclass(frozen=True, slots=True)
class SuiteOptions:
    """How suite tasks run.

    Attributes:
        max_tokens: completion budget per model turn.
        max_turns: model turns per task.
        max_wall_s: wall-clock limit per task.
        seeds: sampling seeds; each task runs once per seed (several only with a temperature above 0).
        temperature: sampling temperature (0: greedy, the agent's default).
    """

    max_tokens: int = 192
    max_turns: int = 6
    max_wall_s: float | None = 600.0
    seeds: tuple[int, ...] = (0,)
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ConfigError("give the suite at least one seed")
        if len(self.seeds) > 1 and self.temperature <= 0:
            raise ConfigError(
                "several seeds need a temperature above 0 (--temperature 0.7, say): greedy decoding gives every "
                "seed the same run"
            )


async def run_task(
    backend: Backend,
    task: Any,
    *,
    constrained: bool,
    options: SuiteOptions,
    tool_choice: str = "auto",
    cut: Cut = FULL,
    seed: int = 0,
) -> dict[str, Any]:
    """Run one demo task in a fresh world; return what the suite stores (pass/fail, turns, buckets, calls).

    The suite plays the person behind the approvals: when the run has ended, every call still waiting for
    approval is approved and runs, as a person reading the request would let it, and the task's check then
    judges the world with it (a call the task did not ask for fails the check like any other). ``cut`` changes
    the agent's options (``bench.cuts``); the full runtime by default.
    """
    from tooldispatch.agent import Agent, Budget
    from tooldispatch.agent.loop import GENERIC_SYSTEM
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.tools.demo import DemoWorld, build_registry

    world = DemoWorld.seed()
    if task.setup is not None:
        task.setup(world)
    dispatcher = Dispatcher(build_registry(world), store=":memory:")
    agent = Agent(
        backend=backend,
        dispatcher=dispatcher,
        budget=Budget(max_turns=options.max_turns, max_wall_s=options.max_wall_s),
        max_tokens=options.max_tokens,
        constrained=constrained,
        tool_choice=tool_choice,
        system_prompt=GENERIC_SYSTEM,
        temperature=options.temperature,
        seed=seed,
        **cut.agent_options,
    )
    run = await agent.arun(task.prompt)
    approved = [(pending.tool, await dispatcher.aapprove(pending.id)) for pending in dispatcher.approvals()]
    buckets: Counter[str] = Counter()
    for turn in run.turns:
        for candidate in turn.outcome.candidates:
            buckets[candidate.bucket] += 1
    passed = bool(task.check(world, run.final_answer or ""))
    return {
        "passed": passed,
        "end": run.end,
        "turns": len(run.turns),
        "calls": [{"name": r.call.name, "status": r.result.status} for r in run.tool_runs],
        "approved": [{"name": name, "status": result.status} for name, result in approved],
        "buckets": dict(buckets),
        "final_answer": run.final_answer,
        "error": run.error,
        "wall_s": run.wall_s,
        "needs_approval": task.needs_approval,
        "completion_tokens": sum(t.completion.usage.completion_tokens for t in run.turns if t.completion.usage),
        "transcript": run.to_dict(),
    }


async def run_suite(
    targets: Sequence[Target],
    tasks: Sequence[Any],
    db: ResultsDB,
    options: SuiteOptions,
    *,
    on_done: Callable[[str, str, bool], None] | None = None,
) -> int:
    """Run every (cell, task, seed) not yet stored; return how many ran now."""
    done = db.done()
    ran = 0
    for target in targets:
        pending = [
            (t, seed)
            for seed in options.seeds
            for t in tasks
            if (target.cell.key, SUITE_PREFIX + t.id, seed) not in done
        ]
        if not pending:
            continue
        backend = target.make_backend()
        try:
            for task, seed in pending:
                started = time.monotonic()
                error: str | None = None
                try:
                    result = await run_task(
                        backend,
                        task,
                        constrained=target.cell.constrained,
                        options=options,
                        tool_choice=target.cell.tool_choice,
                        cut=CUTS[target.cell.cut],
                        seed=seed,
                    )
                except BackendError as exc:
                    result, error = {"passed": False}, f"{type(exc).__name__}: {exc}"
                db.add(_record(target, task, seed, result, time.monotonic() - started, error))
                ran += 1
                if on_done:
                    on_done(target.cell.key, task.id, bool(result["passed"]))
        finally:
            close = getattr(backend, "close", None)
            if callable(close):
                close()
    return ran


def _record(
    target: Target, task: Any, seed: int, result: dict[str, Any], seconds: float, error: str | None
) -> OutputRecord:
    cell = target.cell
    return OutputRecord(
        cell=cell.key,
        case_id=SUITE_PREFIX + task.id,
        seed=seed,
        case={"suite": task.id, "prompt": task.prompt},
        model=cell.model,
        quant=cell.quant,
        tensor_types=dict(target.facts.tensor_types),
        model_file=target.facts.model_file,
        engine="llama.cpp" if cell.backend == "llamacpp" else cell.backend,
        engine_version=target.facts.engine_version,
        backend=cell.backend,
        constrained=cell.constrained,
        text=str(result.get("final_answer") or ""),
        latency_s=seconds,
        completion_tokens=int(result.get("completion_tokens") or 0),
        error=error,
        extra=result,
    )


@dataclass(frozen=True, slots=True)
class SuiteCell:
    """One cell's suite score.

    Attributes:
        cell: the cell key.
        passed: runs whose final world state was right (a run: one task with one seed).
        per_task: task id → passed in every seed.
        runs: task id → {seed: passed}.
        buckets: parse buckets over every turn of every run.
        mean_turns: model turns per run.
    """

    cell: str
    passed: Rate
    per_task: dict[str, bool]
    runs: dict[str, dict[int, bool]]
    buckets: dict[str, int]
    mean_turns: float

    @property
    def seeds(self) -> int:
        """The most seeds any task ran with."""
        return max((len(by_seed) for by_seed in self.runs.values()), default=0)

    def pass_hat(self, k: int) -> float:
        """pass^k over the tasks: the chance that k runs of a task all pass."""
        return pass_hat_k({task: list(by_seed.values()) for task, by_seed in self.runs.items()}, k)

    def outcomes(self) -> dict[str, bool]:
        """Each run (``task#seed``), passed or not: what a cut is paired on."""
        return {f"{task}#{seed}": ok for task, by_seed in self.runs.items() for seed, ok in by_seed.items()}


def summarize_suite(records: Sequence[OutputRecord]) -> list[SuiteCell]:
    """Per-cell pass rates (with bootstrap intervals) of the suite records among ``records``."""
    cells: dict[str, list[OutputRecord]] = {}
    for r in records:
        if r.case_id.startswith(SUITE_PREFIX):
            cells.setdefault(r.cell, []).append(r)
    out = []
    for key, rows in cells.items():
        buckets: Counter[str] = Counter()
        runs: dict[str, dict[int, bool]] = {}
        for r in sorted(rows, key=lambda r: r.seed):
            buckets.update(dict(r.extra.get("buckets") or {}))
            runs.setdefault(r.case_id[len(SUITE_PREFIX) :], {})[r.seed] = bool(r.extra.get("passed"))
        out.append(
            SuiteCell(
                cell=key,
                passed=exact_rate([bool(r.extra.get("passed")) for r in rows]),
                per_task={task: all(by_seed.values()) for task, by_seed in runs.items()},
                runs=runs,
                buckets=dict(buckets),
                mean_turns=sum(int(r.extra.get("turns") or 0) for r in rows) / len(rows),
            )
        )
    return out


def render_suite(cells: Sequence[SuiteCell]) -> str:
    """A Markdown table of suite results."""
    if not cells:
        return "No suite results yet."
    tasks = sorted({t for c in cells for t in c.per_task})
    k = max(c.seeds for c in cells)
    pass_k = [f"pass^{k}"] if k > 1 else []
    lines = [
        "| "
        + " | ".join(["cell", "passed (exact 95 % CI)", *pass_k, "mean turns", *tasks, "parse buckets (all turns)"])
        + " |",
        "|" + "---|" * (len(tasks) + 4 + len(pass_k)),
    ]
    for c in cells:
        marks = [_mark(c.runs.get(t)) for t in tasks]
        buckets = ", ".join(f"{b}: {n}" for b, n in sorted(c.buckets.items())) or "-"
        cell = Cell.from_key(c.cell)
        variant = [cell.mode.replace("-", ", ") if cell.constrained else "", "" if cell.cut == FULL.name else cell.cut]
        label = f"{cell.model}@{cell.quant}" + "".join(f", {v}" for v in variant if v)
        hat = [f"{100 * c.pass_hat(k):.1f} %"] if pass_k else []
        row = [label, c.passed.fmt(), *hat, f"{c.mean_turns:.1f}", *marks, buckets]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _mark(by_seed: Mapping[int, bool] | None) -> str:
    """A task's mark: ✓ or ✗ for one run, the passes over the seeds for several, - for none."""
    if not by_seed:
        return "-"
    if len(by_seed) == 1:
        return "✓" if next(iter(by_seed.values())) else "✗"
    return f"{sum(by_seed.values())}/{len(by_seed)}"


def run_suite_command(
    *,
    spec: MatrixSpec,
    options: SuiteOptions,
    run_dir: Path,
    cuts: Sequence[Cut] = (FULL,),
) -> str:
    """Run the suite for the models ``spec`` names (llama.cpp in process, or a served model; resuming ``run_dir``),
    once per cut and seed; write the corpus and the report (``write_suite_report``) and return the report's
    tables."""
    from tooldispatch.bench.targets import build_targets
    from tooldispatch.tools.demo import demo_tasks

    targets = build_targets(spec)
    targets = [replace(t, cell=replace(t.cell, cut=cut.name)) for t in targets for cut in cuts]
    db = ResultsDB(run_dir)
    try:
        asyncio.run(run_suite(targets, demo_tasks(), db, options))
        return write_suite_report(run_dir, list(db.records()))
    finally:
        db.close()


def run_measures(records: Sequence[OutputRecord]) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """What each suite run did on the way, for ``cuts.paired_totals``: whether it ended with an answer, calls
    dispatched, call attempts refused, model turns, and whether it ended ``stuck``."""
    measures: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in records:
        if not r.case_id.startswith(SUITE_PREFIX):
            continue
        end = str(r.extra.get("end") or "error")
        buckets = dict(r.extra.get("buckets") or {})
        measures.setdefault((r.cell, SUITE_CATEGORY), {})[f"{r.case_id.removeprefix(SUITE_PREFIX)}#{r.seed}"] = {
            "answered": int(end == "final_answer"),
            "calls dispatched": len(r.extra.get("calls") or ()),
            "calls refused": sum(n for b, n in buckets.items() if b not in ACCEPTED_BUCKETS),
            "model turns": int(r.extra.get("turns") or 0),
            "ended stuck": int(end == "stuck"),
        }
    return measures


def write_suite_report(run_dir: Path, records: Sequence[OutputRecord]) -> str:
    """Write ``corpus.jsonl`` (every run with its calls and answer) and ``report/suite.md`` into ``run_dir``;
    return the report's tables."""
    write_corpus(run_dir / CORPUS_NAME, records)
    cells = summarize_suite(records)
    text = render_suite(cells)
    paired = render_paired_cuts(paired_cuts({(c.cell, SUITE_CATEGORY): c.outcomes() for c in cells}))
    if paired:
        text += "\n## Each cut against the full runtime, run by run\n\n" + paired
        text += "\n### What each cut changed on the way, over the same runs\n\n"
        text += render_paired_totals(paired_totals(run_measures(records)))
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "suite.md").write_text("# Demo-world suite\n\n" + text, encoding="utf-8")
    return text
