"""`bench replay` on agent runs: the recorded model outputs through the current agent, dispatcher and checker."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.agent_replay import recorded_model, render_replay, replay_agent_corpus, replay_records
from tooldispatch.bench.corpus import Cell, OutputRecord, write_corpus
from tooldispatch.bench.multiturn import MultiTurnOptions, ground_truth_backend, run_case
from tooldispatch.cli import app
from tooldispatch.errors import ConfigError

RESULTS = Path(__file__).parents[3] / "docs" / "results" / "agent-qwen25-coder"


def _first_case() -> bfcl.MultiTurnCase:
    try:
        return bfcl.load_multi_turn("multi_turn_base")[0]
    except ConfigError as exc:  # the wheel could not be fetched (no PyPI access)
        pytest.skip(str(exc))


def _recorded(case: bfcl.MultiTurnCase, cut: str = "full") -> OutputRecord:
    """The ground truth's run of ``case``, stored as a multi-turn record of a cell with ``cut``."""
    result = asyncio.run(run_case(case, ground_truth_backend(case), MultiTurnOptions()))
    cell = dataclasses.replace(Cell(backend="scripted", model="m", quant="Q4_K_M"), cut=cut)
    return OutputRecord(
        cell=cell.key, case_id=case.id, seed=0, case={"id": case.id}, model="m", quant="Q4_K_M", extra=result
    )


def test_a_recorded_run_replays_faithfully_to_the_same_outcome() -> None:
    case = _first_case()
    record = _recorded(case)
    assert record.extra["passed"] is True
    [row] = asyncio.run(replay_records([record]))
    outputs = sum(len(t["turns"]) for t in record.extra["transcripts"])
    assert (row.group, row.run, row.recorded, row.replayed, row.faithful, row.outputs) == (
        "multi_turn_base",
        case.id,
        True,
        True,
        True,
        (outputs, outputs),
    )
    assert render_replay([row]).splitlines()[2] == "| m@Q4_K_M | multi_turn_base | 1 | 1 | 1 | 1 | 1 |"


def test_a_replay_that_needs_an_output_never_recorded_is_not_faithful() -> None:
    """With the last user turn's answer removed, the replay asks for one output more than was recorded: the run
    ends there as a backend error (BFCL's checker still passes it, the turn's calls having run), and the table lists
    it as not faithful."""
    case = _first_case()
    record = _recorded(case)
    extra: dict[str, Any] = copy.deepcopy(record.extra)
    extra["transcripts"][-1]["turns"].pop()
    [row] = asyncio.run(replay_records([dataclasses.replace(record, extra=extra)]))
    recorded = sum(len(t["turns"]) for t in extra["transcripts"])
    assert (row.recorded, row.replayed, row.faithful, row.outputs) == (True, True, False, (recorded, recorded + 1))
    assert render_replay([row]).splitlines()[-1] == (
        f"- m@Q4_K_M {case.id}: passed → passed; asked for {recorded + 1} of {recorded} recorded outputs"
    )


def test_the_recorded_model_gives_the_outputs_in_order_with_their_native_calls() -> None:
    transcripts = [
        {"turns": [{"content": "a", "finish_reason": "length"}, {"content": "b", "reasoning": "r"}]},
        {"turns": [{"content": "", "native_calls": [{"name": "ls", "arguments": "{}"}], "finish_reason": None}]},
    ]
    model = recorded_model(transcripts)
    assert isinstance(model.turns, list)
    assert [(t.content, t.reasoning, tuple(t.tool_calls), t.finish_reason) for t in model.turns] == [
        ("a", "", (), "length"),
        ("b", "r", (), "stop"),
        ("", "", ({"name": "ls", "arguments": "{}"},), "stop"),
    ]


@pytest.mark.parametrize(
    "corpus",
    [
        "multiturn-0.5b-before-corpus.jsonl",
        "multiturn-0.5b-corpus.jsonl",
        "multiturn-1.5b-corpus.jsonl",
        "suite-0.5b-corpus.jsonl",
        "suite-1.5b-corpus.jsonl",
        "suite-0.5b-seeds-corpus.jsonl",
        "suite-1.5b-seeds-corpus.jsonl",
    ],
)
def test_the_committed_agent_runs_replay_faithfully_to_their_outcomes(corpus: str) -> None:
    """Every committed run, replayed on this build: exactly the recorded outputs asked for (faithful) and the same
    outcome. A change that fails this changed what the runtime does with these models' outputs: say which runs
    moved, and why."""
    _first_case()
    table = replay_agent_corpus(RESULTS / corpus)
    rows = [line.split(" | ") for line in table.splitlines()[2:] if line.startswith("| ")]
    assert rows
    for row in rows:
        runs, same, faithful = row[2], row[5], row[6].rstrip(" |")
        assert same == runs and faithful == runs, table
    assert "→" not in table and "asked for" not in table


def test_cli_replays_an_agent_corpus_and_refuses_single_turn_options(tmp_path: Path) -> None:
    case = _first_case()
    path = tmp_path / "corpus.jsonl"
    write_corpus(path, [_recorded(case, cut="strict-parsing")])
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "replay", str(path)])
    assert result.exit_code == 0, result.output
    assert "| m@Q4_K_M [strict-parsing] | multi_turn_base | 1 | 1 | 1 | 1 | 1 |" in result.output
    refused = runner.invoke(app, ["bench", "replay", str(path), "--out", str(tmp_path / "r")])
    assert refused.exit_code == 2
    assert "--out, --compare and --policy apply to single-turn corpora, not to agent runs" in refused.output
