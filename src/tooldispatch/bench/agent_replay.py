"""Replay stored agent runs: each run's recorded model outputs, in order, through the current agent, dispatcher
and checker (``tooldispatch bench replay`` on a multi-turn or suite corpus).

No model runs: a scripted backend answers each request with the next output the model gave when the run was
recorded. While the runtime answers as it did then, every request is the one that output answered, so the replay
is the recorded run; a change in the parser, the feedback or the dispatcher shows as a run whose outcome changed.
A replay is *faithful* when it asked for exactly the recorded outputs, no more and no fewer. When it is not, the
runtime took the conversation elsewhere (it ended sooner, or asked for an output that was never recorded, which
ends that run as a backend error), and its outcome after that point says nothing about the model: rerun the
model there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.corpus import Cell, OutputRecord, read_corpus
from tooldispatch.bench.cuts import CUTS
from tooldispatch.bench.multiturn import MultiTurnOptions, run_case
from tooldispatch.bench.suite import SUITE_CATEGORY, SUITE_PREFIX, SuiteOptions, run_task
from tooldispatch.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Replayed:
    """One stored run replayed.

    Attributes:
        cell: the cell key (its cut is replayed too).
        group: the BFCL category, or the suite.
        run: the case id (with ``#seed`` for the suite).
        recorded: whether the stored run passed.
        replayed: whether the replay passed.
        faithful: the replay asked for exactly the recorded outputs.
        outputs: recorded outputs, and how many the replay asked for.
    """

    cell: str
    group: str
    run: str
    recorded: bool
    replayed: bool
    faithful: bool
    outputs: tuple[int, int]


def recorded_model(transcripts: Sequence[Mapping[str, Any]]) -> ScriptedBackend:
    """A backend that gives the recorded outputs of ``transcripts`` (one per user turn, ``AgentRun.to_dict()``),
    in the order the model gave them."""
    turns = [
        ScriptedTurn(
            content=str(turn.get("content") or ""),
            reasoning=str(turn.get("reasoning") or ""),
            tool_calls=tuple(turn.get("native_calls") or ()),
            finish_reason=str(turn.get("finish_reason") or "stop"),
            chunk=4096,
        )
        for transcript in transcripts
        for turn in transcript.get("turns") or ()
    ]
    return ScriptedBackend(turns)


def is_agent_record(record: OutputRecord) -> bool:
    """A multi-turn case or a suite run with its transcripts."""
    return "transcripts" in record.extra or "transcript" in record.extra


async def replay_records(records: Sequence[OutputRecord], *, wheel: Path | None = None) -> list[Replayed]:
    """Replay every agent run among ``records`` (see the module's docstring), one after another."""
    from tooldispatch.tools.demo import demo_tasks

    tasks = {task.id: task for task in demo_tasks()}
    cases: dict[str, bfcl.MultiTurnCase] = {}
    replayed = []
    for record in records:
        if not is_agent_record(record):
            continue
        cell = Cell.from_key(record.cell)
        if cell.cut not in CUTS:
            raise ConfigError(
                f"{record.case_id}: the cut {cell.cut!r} of {record.cell} is not one of {', '.join(CUTS)}"
            )
        cut = CUTS[cell.cut]
        if "transcripts" in record.extra:
            category = str(record.extra.get("category") or record.case_id.rsplit("_", 1)[0])
            if category not in {c.category for c in cases.values()}:
                cases.update({c.id: c for c in bfcl.load_multi_turn(category, wheel=wheel)})
            case = cases.get(record.case_id)
            if case is None:
                raise ConfigError(f"{record.case_id} is not a case of BFCL's {category} in the installed wheel")
            model = recorded_model(record.extra["transcripts"])
            result = await run_case(case, model, MultiTurnOptions(seed=record.seed), wheel=wheel, cut=cut)
            group, run = category, record.case_id
        else:
            task = tasks.get(record.case_id.removeprefix(SUITE_PREFIX))
            if task is None:
                raise ConfigError(f"{record.case_id} is not one of the demo tasks ({', '.join(tasks)})")
            model = recorded_model([record.extra["transcript"]])
            result = await run_task(
                model, task, constrained=cell.constrained, options=SuiteOptions(), tool_choice=cell.tool_choice,
                cut=cut, seed=record.seed,
            )  # fmt: skip
            group, run = SUITE_CATEGORY, f"{task.id}#{record.seed}"
        assert isinstance(model.turns, list)
        asked, recorded = len(model.requests), len(model.turns)
        replayed.append(
            Replayed(
                record.cell,
                group,
                run,
                bool(record.extra.get("passed")),
                bool(result.get("passed")),
                asked == recorded,
                (recorded, asked),
            )
        )
    return replayed


def render_replay(rows: Sequence[Replayed]) -> str:
    """A Markdown table per cell and group, and the runs whose outcome changed or that were not faithful."""
    groups: dict[tuple[str, str], list[Replayed]] = {}
    for row in rows:
        groups.setdefault((row.cell, row.group), []).append(row)
    lines = [
        "| cell | group | runs | passed, recorded | passed, replayed | same outcome | faithful |",
        "|---|---|---|---|---|---|---|",
    ]
    for (key, group), items in sorted(groups.items()):
        lines.append(
            f"| {Cell.from_key(key).label} | {group} | {len(items)} | {sum(r.recorded for r in items)} | "
            f"{sum(r.replayed for r in items)} | {sum(r.recorded == r.replayed for r in items)} | "
            f"{sum(r.faithful for r in items)} |"
        )
    changed = [r for r in rows if r.recorded != r.replayed or not r.faithful]
    if changed:
        lines.append("")
        for r in changed:
            what = f"{'passed' if r.recorded else 'failed'} → {'passed' if r.replayed else 'failed'}"
            recorded, asked = r.outputs
            faith = "" if r.faithful else f"; asked for {asked} of {recorded} recorded outputs"
            lines.append(f"- {Cell.from_key(r.cell).label} {r.run}: {what}{faith}")
    return "\n".join(lines) + "\n"


def holds_agent_runs(path: Path) -> bool:
    """Whether the corpus at ``path`` (an existing file) holds agent runs rather than single-turn outputs."""
    return any(is_agent_record(r) for r in read_corpus(path))


def replay_agent_corpus(path: Path) -> str:
    """Replay the agent runs of a corpus and return the table.

    Raises:
        ConfigError: the file does not exist or holds no agent run with its transcripts.
    """
    if not path.is_file():
        raise ConfigError(f"no corpus at {path}; a benchmark run writes RUN_DIR/corpus.jsonl")
    records = [r for r in read_corpus(path) if is_agent_record(r)]
    if not records:
        raise ConfigError(f"{path} holds no agent runs (multi-turn cases or suite runs with their transcripts)")
    return render_replay(asyncio.run(replay_records(records)))
