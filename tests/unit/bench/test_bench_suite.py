"""The demo-world suite: tasks run through the real agent loop and dispatcher, scored by final world state."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from tooldispatch.agent.loop import GENERIC_SYSTEM
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench.corpus import CORPUS_NAME, Cell, read_corpus
from tooldispatch.bench.cuts import paired_cuts
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import Target
from tooldispatch.bench.suite import (
    SUITE_CATEGORY,
    SuiteOptions,
    render_suite,
    run_suite,
    summarize_suite,
    write_suite_report,
)
from tooldispatch.errors import ConfigError
from tooldispatch.tools.demo import demo_tasks

MESSAGE = (
    '<tool_call>{"name": "send_message", "arguments": {"to": "c-202", "subject": "Delay", '
    '"body": "Your delivery is delayed by 30 minutes."}}</tool_call>'
)


def _tasks(*ids: str) -> list[object]:
    return [t for t in demo_tasks() if t.id in ids]


def test_suite_scores_by_final_world_state_and_resumes(tmp_path: Path) -> None:
    """A task done right passes, a wrong side effect fails, a rerun runs nothing again, and every turn carries the
    suite's generic system prompt."""
    tasks = _tasks("message-delay", "count-pending-south")
    script = [
        ScriptedTurn(content=MESSAGE),
        ScriptedTurn(content="Done: the customer was told."),
        ScriptedTurn(content=MESSAGE.replace("c-202", "c-203")),
        ScriptedTurn(content="There are 3."),
    ]
    backend = ScriptedBackend(turns=script)
    target = Target(cell=Cell(backend="scripted", model="m", quant="Q4_1"), make_backend=lambda: backend)
    db = ResultsDB(tmp_path)
    ran = asyncio.run(run_suite([target], tasks, db, SuiteOptions(max_turns=3)))
    [cell] = summarize_suite(list(db.records()))
    assert ran == 2
    assert cell.per_task == {"message-delay": True, "count-pending-south": False}
    assert (cell.passed.k, cell.passed.n, cell.mean_turns) == (1, 2, 2.0)
    assert cell.buckets == {"ok_strict": 2}
    again = asyncio.run(run_suite([target], tasks, db, SuiteOptions(max_turns=3)))
    assert (again, len(backend.requests)) == (0, 4)
    # The suite still sends the generic system prompt it was run with before the agent's default changed.
    assert {r.messages[0]["content"] for r in backend.requests} == {GENERIC_SYSTEM}
    table = render_suite([cell])
    assert "| m@Q4_1 | 50.0 % " in table
    constrained = Cell(backend="scripted", model="m", quant="Q4_1", constrained=True).key
    assert "| m@Q4_1, constrained | 50.0 % " in render_suite([dataclasses.replace(cell, cell=constrained)])


def test_a_cut_cell_runs_the_agent_with_its_options_and_is_paired_task_by_task(tmp_path: Path) -> None:
    """The answer-tool cell offers final_answer (the full cell does not), keeps its own results, and the two
    cells pair task by task."""
    tasks = _tasks("message-delay")
    script = [ScriptedTurn(content=MESSAGE), ScriptedTurn(content="Done: the customer was told.")]
    full_backend, cut_backend = ScriptedBackend(turns=list(script)), ScriptedBackend(turns=list(script))
    full = Cell(backend="scripted", model="m", quant="Q4_1")
    cut = dataclasses.replace(full, cut="answer-tool")
    targets = [
        Target(cell=full, make_backend=lambda: full_backend),
        Target(cell=cut, make_backend=lambda: cut_backend),
    ]
    db = ResultsDB(tmp_path)
    assert asyncio.run(run_suite(targets, tasks, db, SuiteOptions(max_turns=3))) == 2
    offered = [{t.name for t in b.requests[0].tools or ()} for b in (full_backend, cut_backend)]
    assert "final_answer" not in offered[0]
    assert offered[1] - offered[0] == {"final_answer"}
    cells = summarize_suite(list(db.records()))
    assert sorted(c.cell for c in cells) == sorted([full.key, cut.key])
    assert "| m@Q4_1, answer-tool | 100.0 % " in render_suite(cells)
    [row] = paired_cuts({(c.cell, SUITE_CATEGORY): c.outcomes() for c in cells})
    assert (row["cut"], row["changed"], row["difference"].value, row["difference"].n) == ("answer-tool", [], 0.0, 1)
    text = write_suite_report(tmp_path, list(db.records()))
    assert (
        "| m@Q4_1 | answer-tool | demo-world suite | 100.0 % [2.5, 100.0] (1/1) | 100.0 % [2.5, 100.0] (1/1) "
        "| +0.0 pp [+0.0, +0.0] | none |"
    ) in text.splitlines()
    assert (
        text.splitlines()[-1]
        == "| m@Q4_1 | answer-tool | demo-world suite | 1 | 1 → 1 | 1 → 1 | 0 → 0 | 2 → 2 | 0 → 0 |"
    )
    assert (tmp_path / "report" / "suite.md").read_text(encoding="utf-8") == "# Demo-world suite\n\n" + text
    corpus = list(read_corpus(tmp_path / CORPUS_NAME))
    assert sorted((r.cell, r.case_id, r.extra["passed"]) for r in corpus) == [
        (full.key, "suite:message-delay", True),
        (cut.key, "suite:message-delay", True),
    ]


def test_seeds_run_each_task_once_per_seed_and_give_pass_hat_k(tmp_path: Path) -> None:
    """Two seeds at temperature 0.7: each task runs twice with its seed sent, the table shows pass^2 and the
    passes per task; several seeds with greedy decoding are refused."""
    tasks = _tasks("message-delay")
    script = [
        ScriptedTurn(content=MESSAGE),
        ScriptedTurn(content="Done: the customer was told."),
        ScriptedTurn(content="I cannot send messages."),
    ]
    backend = ScriptedBackend(turns=script)
    target = Target(cell=Cell(backend="scripted", model="m", quant="Q4_1"), make_backend=lambda: backend)
    db = ResultsDB(tmp_path)
    options = SuiteOptions(max_turns=3, seeds=(0, 1), temperature=0.7)
    assert asyncio.run(run_suite([target], tasks, db, options)) == 2
    assert [(r.seed, r.temperature) for r in backend.requests] == [(0, 0.7), (0, 0.7), (1, 0.7)]
    [cell] = summarize_suite(list(db.records()))
    assert cell.runs == {"message-delay": {0: True, 1: False}}
    assert (cell.per_task, cell.seeds, cell.pass_hat(1), cell.pass_hat(2)) == ({"message-delay": False}, 2, 0.5, 0.0)
    assert cell.outcomes() == {"message-delay#0": True, "message-delay#1": False}
    table = render_suite([cell]).splitlines()
    assert table[0] == (
        "| cell | passed (exact 95 % CI) | pass^2 | mean turns | message-delay | parse buckets (all turns) |"
    )
    assert table[2].startswith("| m@Q4_1 | 50.0 % ")
    assert table[2].endswith(" | 0.0 % | 1.5 | 1/2 | ok_strict: 1 |")
    with pytest.raises(ConfigError, match="several seeds need a temperature above 0"):
        SuiteOptions(seeds=(0, 1))


def test_a_call_waiting_for_approval_is_approved_when_the_run_ends_and_judged_by_the_check(tmp_path: Path) -> None:
    """cancel_order waits for a person during the run; the suite approves it afterwards, so the requested cancel
    passes and a cancel of the wrong order still fails."""
    tasks = _tasks("cancel-east")

    def cancel(order: str) -> list[ScriptedTurn]:
        call = {"name": "cancel_order", "arguments": {"order_id": order, "reason": "customer request"}}
        return [ScriptedTurn(content=f"<tool_call>{json.dumps(call)}</tool_call>"), ScriptedTurn(content="Asked.")]

    db = ResultsDB(tmp_path)
    for model, order in (("right", "o-301"), ("wrong", "o-302")):
        backend = ScriptedBackend(turns=cancel(order))
        cell = Cell(backend="scripted", model=model, quant="Q4_1")
        asyncio.run(run_suite([Target(cell=cell, make_backend=lambda b=backend: b)], tasks, db, SuiteOptions()))
    results = {r.model: r.extra for r in db.records()}
    assert [c["status"] for c in results["right"]["calls"]] == ["awaiting_approval"]
    assert (results["right"]["approved"], results["right"]["passed"]) == (
        [{"name": "cancel_order", "status": "ok"}],
        True,
    )
    assert (results["wrong"]["approved"], results["wrong"]["passed"]) == (
        [{"name": "cancel_order", "status": "ok"}],
        False,
    )
