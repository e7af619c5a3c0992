"""BFCL multi-turn through the agent and dispatcher, checked on BFCL's own ground truth and scored by its checker."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.corpus import CORPUS_NAME, Cell, read_corpus
from tooldispatch.bench.cuts import (
    CUTS,
    paired_cuts,
    paired_totals,
    parse_cuts,
    render_paired_cuts,
    render_paired_totals,
)
from tooldispatch.bench.multiturn import (
    TOOL_CLASSES,
    MultiTurnOptions,
    ground_truth_backend,
    run_case,
    tool_metadata,
)
from tooldispatch.cli import app
from tooldispatch.errors import ConfigError

SAMPLE_EVERY = 25
"""Every 25th case of each category (8 per category) runs in the fast suite; the full figure has its command in
docs/results/bfcl-multiturn-ground-truth/README.md."""

UNPASSABLE = {
    "multi_turn_base_173": "multi_turn:empty_turn_model_response",
    "multi_turn_miss_param_173": "multi_turn:empty_turn_model_response",
    "multi_turn_miss_func_173": "multi_turn:empty_turn_model_response",
    "multi_turn_long_context_173": "multi_turn:empty_turn_model_response",
    "multi_turn_miss_func_49": "multi_turn:execution_response_mismatch",
}
"""Ground truths the runtime refuses to run as written, with BFCL's verdict (see the tests below)."""


def _cases(category: str) -> list[bfcl.MultiTurnCase]:
    try:
        return bfcl.load_multi_turn(category)
    except ConfigError as exc:  # the wheel could not be fetched (no PyPI access)
        pytest.skip(str(exc))


def _case(category: str, case_id: str) -> bfcl.MultiTurnCase:
    return next(c for c in _cases(category) if c.id == case_id)


def _replay(case: bfcl.MultiTurnCase) -> dict[str, Any]:
    return asyncio.run(run_case(case, ground_truth_backend(case), MultiTurnOptions()))


@pytest.mark.parametrize("category", bfcl.MULTI_TURN_CATEGORIES)
def test_ground_truth_sample_scores_every_case(category: str) -> None:
    """BFCL's ground-truth calls, replayed through the parser, dispatcher and environment, pass BFCL's checker."""
    cases = _cases(category)
    assert len(cases) == 200
    sample = [c for c in cases[::SAMPLE_EVERY] if c.id not in UNPASSABLE]
    failures = {c.id: r["verdict"] for c in sample if not (r := _replay(c))["passed"]}
    assert failures == {}
    assert len(sample) == 8


def test_ground_truth_with_a_string_for_an_integer_is_refused_before_the_environment() -> None:
    """base_173's ground truth passes ticket_id='ticket_001' where BFCL declares an integer: refused, never run."""
    case = _case("multi_turn_base", "multi_turn_base_173")
    result = _replay(case)
    assert case.ground_truth[3] == ("close_ticket(ticket_id='ticket_001')",)
    assert result["executed"][3] == []
    assert result["verdict"]["error_type"] == UNPASSABLE[case.id]
    candidates = [c for t in result["transcripts"][3]["turns"] for c in t["parse"]["candidates"]]
    assert [(c["name"], c["bucket"]) for c in candidates] == [("close_ticket", "SchemaMismatch")]


def test_ground_truth_calling_a_held_out_function_early_is_refused() -> None:
    """miss_func_49's ground truth calls tail at turn 1, though BFCL only adds it at turn 3: not offered, not run."""
    case = _case("multi_turn_miss_func", "multi_turn_miss_func_49")
    result = _replay(case)
    assert [f["name"] for f in case.held_out[3]] == ["cat", "tail", "wc"]
    assert "tail(file_name='file3.txt')" in case.ground_truth[1]
    assert result["executed"][1] == ["sort(file_name='file3.txt')"]
    assert result["verdict"]["error_type"] == UNPASSABLE[case.id]


def test_held_out_functions_are_offered_from_their_turn_with_bfcls_message() -> None:
    """A miss_func case offers its held-out functions only from their turn, whose user message is BFCL's; every
    turn's plain-text answer stays in the conversation the next turn continues."""
    case = _case("multi_turn_miss_func", "multi_turn_miss_func_0")
    backend = ground_truth_backend(case)
    result = asyncio.run(run_case(case, backend, MultiTurnOptions()))
    assert result["passed"]
    ((turn, docs),) = case.held_out.items()
    names = {d["name"] for d in docs}
    for request in backend.requests:
        users = sum(1 for m in request.messages if m.get("role") == "user")
        offered = {t.name for t in request.tools}
        assert (names <= offered) is (users > turn)
    added = [m for m in result["messages"] if m.get("role") == "user"][turn]
    assert added["content"] == bfcl.added_functions_message()
    roles = [m["role"] for m in result["messages"]]
    before_users = [roles[i - 1] for i, role in enumerate(roles) if role == "user" and i > 0]
    assert before_users == ["assistant"] * (len(case.turns) - 1)
    assert result["messages"][-1] == {"role": "assistant", "content": "Done."}


def test_the_checker_fails_a_missing_write_and_a_run_that_stopped() -> None:
    """BFCL's checker rejects the ground truth less one write (state mismatch) and a run cut short (force-quit)."""
    case = _case("multi_turn_base", "multi_turn_base_0")
    executed = [list(turn) for turn in case.ground_truth]
    assert bfcl.check(case, executed) == {"valid": True}
    writes = [
        (i, j) for i, t in enumerate(executed) for j, c in enumerate(t) if TOOL_CLASSES[c.split("(")[0]] != "read"
    ]
    i, j = writes[0]
    without = [t[:j] + t[j + 1 :] if k == i else t for k, t in enumerate(executed)]
    assert bfcl.check(case, without)["valid"] is False
    stopped = bfcl.check(case, executed[:-1])
    assert stopped["error_type"] == "multi_turn:force_terminated"


def test_every_environment_function_has_exactly_one_class() -> None:
    """TOOL_CLASSES names every function of the multi-turn environments, and nothing else."""
    names = {f["name"] for c in _cases("multi_turn_miss_func") for f in (*c.functions, *_held(c))}
    assert names == set(TOOL_CLASSES)
    assert tool_metadata("rm") == {
        "read_only": False,
        "destructive": True,
        "requires_approval": False,
        "max_attempts": 1,
    }
    assert tool_metadata("ls") == {"read_only": True, "concurrency_safe": False, "max_attempts": 1}
    with pytest.raises(ConfigError, match="no class in TOOL_CLASSES"):
        tool_metadata("format_disk")


def _held(case: bfcl.MultiTurnCase) -> list[Mapping[str, Any]]:
    return [d for docs in case.held_out.values() for d in docs]


def test_read_functions_leave_the_environment_unchanged() -> None:
    """Every ground-truth call of a function classed read leaves every environment's public state as it was."""
    changed = []
    for case in _cases("multi_turn_base")[::5]:
        instances = bfcl.new_environment(case)
        methods = bfcl.environment_methods(instances)
        for turn in case.ground_truth:
            for text in turn:
                name, arguments = bfcl.parse_call(text, methods[text.split("(")[0]])
                before = _state(instances)
                methods[name](**arguments)
                if TOOL_CLASSES[name] == "read" and _state(instances) != before:
                    changed.append(text)
    assert changed == []


def _state(instances: Mapping[str, Any]) -> str:
    return repr({cls: {k: v for k, v in vars(i).items() if not k.startswith("_")} for cls, i in instances.items()})


def test_calls_are_read_and_written_as_literals() -> None:
    """Ground-truth strings are read with ast (positional arguments named by the method); calls are written back
    with literal reprs, non-finite floats included."""
    case = _case("multi_turn_base", "multi_turn_base_0")
    methods = bfcl.environment_methods(bfcl.new_environment(case))
    assert bfcl.parse_call("cd('docs')", methods["cd"]) == ("cd", {"folder": "docs"})
    assert bfcl.parse_call("mean(numbers=[1, 2.5])") == ("mean", {"numbers": [1, 2.5]})
    assert bfcl.render_call("echo", {"content": "it's", "file_name": "a.txt"}) == (
        "echo(content=\"it's\", file_name='a.txt')"
    )
    assert bfcl.render_call("f", {"x": [math.inf, {"k": None}]}) == "f(x=[float('inf'), {'k': None}])"
    with pytest.raises(ConfigError, match="cannot read the ground-truth call"):
        bfcl.parse_call("__import__('os').system('true')")


def test_cli_replays_the_ground_truth_and_rejects_mixed_categories(tmp_path: Path) -> None:
    """`bench bfcl --ground-truth` on multi-turn categories writes the table; mixing in single-turn ones is refused."""
    _cases("multi_turn_base")
    runner = CliRunner()
    args = ["bench", "bfcl", "--categories", "multi_turn_base", "--limit", "2", "--ground-truth"]
    result = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "gt")])
    assert result.exit_code == 0, result.output
    assert "| bfcl-ground-truth@none | multi_turn_base | 100.0 % [15.8, 100.0] (2/2) |" in result.output
    assert (tmp_path / "gt" / "report" / "multiturn.md").is_file()
    again = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "gt")])
    assert again.exit_code == 0 and "multi_turn_base_0: passed" not in again.output
    mixed = runner.invoke(app, ["bench", "bfcl", "--categories", "multi_turn_base,simple_python", "--ground-truth"])
    assert mixed.exit_code == 2
    assert "run single-turn and multi-turn categories separately" in mixed.output


def _keys_capitalized(case: bfcl.MultiTurnCase) -> ScriptedBackend:
    """The ground truth with every argument key written capitalized (``Folder`` for ``folder``): calls that only
    the schema-guided repair (case normalization of keys) makes valid."""
    truth = ground_truth_backend(case)
    assert callable(truth.turns)
    script = truth.turns

    def capitalized(request: ChatRequest) -> ScriptedTurn:
        turn = script(request)
        content = re.sub(r'"arguments": \{.*\}', lambda m: re.sub(r'"(\w+)": ', _cap, m.group(0)), turn.content)
        return dataclasses.replace(turn, content=content)

    return ScriptedBackend(capitalized)


def _cap(match: re.Match[str]) -> str:
    key = match.group(1)
    return f'"{key}": ' if key == "arguments" else f'"{key.capitalize()}": '


def test_a_cut_changes_the_agent_and_only_what_it_names() -> None:
    """Calls that need a key repaired pass with the full runtime and fail with repair off; the answer-tool cut
    offers the final_answer tool, and the ground truth still passes through it."""
    case = _case("multi_turn_base", "multi_turn_base_0")
    full = asyncio.run(run_case(case, _keys_capitalized(case), MultiTurnOptions()))
    assert full["passed"] is True
    assert full["buckets"].get("repaired", 0) > 0
    bare = asyncio.run(run_case(case, _keys_capitalized(case), MultiTurnOptions(), cut=CUTS["no-repair"]))
    assert bare["passed"] is False
    assert bare["executed"][0] == []
    assert set(bare["buckets"]) == {"SchemaMismatch"}
    backend = ground_truth_backend(case)
    answer = asyncio.run(run_case(case, backend, MultiTurnOptions(), cut=CUTS["answer-tool"]))
    assert answer["passed"] is True
    assert "final_answer" in {t.name for t in backend.requests[0].tools or ()}


def _single_quoted(case: bfcl.MultiTurnCase) -> ScriptedBackend:
    """The ground truth with every call's JSON written in single quotes, as Python writes a dict: calls that only
    the tolerant reading takes."""
    truth = ground_truth_backend(case)
    assert callable(truth.turns)
    script = truth.turns

    def quoted(request: ChatRequest) -> ScriptedTurn:
        turn = script(request)
        return dataclasses.replace(turn, content=turn.content.replace('"', "'"))

    return ScriptedBackend(quoted)


def test_the_strict_parsing_and_bare_feedback_cuts() -> None:
    """Calls written whole pass through both cuts; calls in Python's quotes run with the tolerant reading and stay
    text with the strict one, so the conversation fails at its first turn."""
    case = _case("multi_turn_base", "multi_turn_base_0")
    for name in ("strict-parsing", "bare-feedback"):
        record = asyncio.run(run_case(case, ground_truth_backend(case), MultiTurnOptions(), cut=CUTS[name]))
        assert record["passed"] is True, name
    full = asyncio.run(run_case(case, _single_quoted(case), MultiTurnOptions()))
    assert full["passed"] is True
    assert set(full["buckets"]) == {"ok_fallback"}
    strict = asyncio.run(run_case(case, _single_quoted(case), MultiTurnOptions(), cut=CUTS["strict-parsing"]))
    assert strict["passed"] is False
    assert strict["executed"][0] == []
    assert strict["buckets"] == {}


def test_cuts_are_parsed_by_name_and_kept_in_the_cell_key() -> None:
    """--cuts names are checked and deduplicated; a cut is the key's fifth part, and the full runtime's key is the
    four-part key every earlier run stored."""
    assert [c.name for c in parse_cuts("full, no-repair,full")] == ["full", "no-repair"]
    with pytest.raises(ConfigError) as info:
        parse_cuts("full,no-parser")
    assert str(info.value) == (
        "unknown cut 'no-parser'; the cuts are: full, no-repair, strict-parsing, bare-feedback, no-repeat-guard, "
        "answer-tool"
    )
    with pytest.raises(ConfigError, match="name at least one cut"):
        parse_cuts(" , ")
    cell = Cell(backend="llamacpp", model="m", quant="Q4_K_M")
    assert cell.key == "llamacpp|m@Q4_K_M|client|free"
    cut = dataclasses.replace(cell, cut="no-repair")
    assert cut.key == "llamacpp|m@Q4_K_M|client|free|no-repair"
    assert Cell.from_key(cut.key) == cut
    assert Cell.from_key(cell.key) == cell
    assert cut.label == "m@Q4_K_M [no-repair]"


def test_each_cut_is_paired_with_the_full_runtime_on_the_cases_both_ran() -> None:
    """The paired table compares a cut with the full cell of the same model and group on their common cases only."""
    full = Cell(backend="llamacpp", model="m", quant="Q4_K_M")
    guard_off = dataclasses.replace(full, cut="no-repeat-guard")
    other_model = Cell(backend="llamacpp", model="n", quant="Q4_K_M", cut="no-repair")
    outcomes = {
        (full.key, "multi_turn_base"): {f"multi_turn_base_{i}": i < 2 for i in range(4)},
        (guard_off.key, "multi_turn_base"): {f"multi_turn_base_{i}": i in (0, 2) for i in range(3)},
        (guard_off.key, "multi_turn_miss_func"): {"multi_turn_miss_func_0": True},
        (other_model.key, "multi_turn_base"): {"multi_turn_base_0": True},
    }
    [row] = paired_cuts(outcomes)
    assert (row["cut"], row["group"], row["changed"]) == (
        "no-repeat-guard",
        "multi_turn_base",
        ["multi_turn_base_1", "multi_turn_base_2"],
    )
    assert (row["full"].k, row["full"].n, row["with_cut"].k, row["with_cut"].n) == (2, 3, 2, 3)
    assert (row["difference"].value, row["difference"].n) == (0.0, 3)
    table = render_paired_cuts([row])
    assert table.splitlines()[0].startswith("| model | cut | category | full runtime |")
    assert table.splitlines()[2].startswith(
        "| m@Q4_K_M | no-repeat-guard | multi_turn_base | 66.7 % [9.4, 99.2] (2/3) | 66.7 % [9.4, 99.2] (2/3) | "
    )
    assert table.splitlines()[2].endswith(" | multi_turn_base_1, multi_turn_base_2 |")
    assert table.splitlines()[-1] == f"- **no-repeat-guard**: {CUTS['no-repeat-guard'].changed}."
    assert render_paired_cuts([]) == ""


def test_what_each_cut_changed_on_the_way_is_totalled_over_the_runs_both_cells_ran() -> None:
    """Totals per measure, full → cut, over the common runs only; a cut without its full cell has no row."""
    full = Cell(backend="llamacpp", model="m", quant="Q4_K_M")
    guard_off = dataclasses.replace(full, cut="no-repeat-guard")
    alone = Cell(backend="llamacpp", model="n", quant="Q4_K_M", cut="no-repair")
    measures = {
        (full.key, "multi_turn_base"): {
            "a": {"calls run": 2, "ended stuck": 1},
            "b": {"calls run": 1, "ended stuck": 0},
        },
        (guard_off.key, "multi_turn_base"): {"a": {"calls run": 5, "ended stuck": 0}, "c": {"calls run": 9}},
        (alone.key, "multi_turn_base"): {"a": {"calls run": 1}},
    }
    [row] = paired_totals(measures)
    assert (row["cut"], row["runs"], row["totals"]) == (
        "no-repeat-guard",
        1,
        {"calls run": (2, 5), "ended stuck": (1, 0)},
    )
    assert render_paired_totals([row]).splitlines() == [
        "| model | cut | category | runs | calls run, full → cut | ended stuck, full → cut |",
        "|---|---|---|---|---|---|",
        "| m@Q4_K_M | no-repeat-guard | multi_turn_base | 1 | 2 → 5 | 1 → 0 |",
    ]
    assert render_paired_totals([]) == ""


def test_cli_runs_each_cut_as_a_cell_and_refuses_unknown_ones(tmp_path: Path) -> None:
    """`--cuts full,no-repair` on the ground truth gives two cells, both 2/2, paired with no case changed."""
    _cases("multi_turn_base")
    runner = CliRunner()
    args = ["bench", "bfcl", "--categories", "multi_turn_base", "--limit", "2", "--ground-truth"]
    result = runner.invoke(app, [*args, "--cuts", "full,no-repair", "--run-dir", str(tmp_path / "gt")])
    assert result.exit_code == 0, result.output
    assert "| bfcl-ground-truth@none [no-repair] | multi_turn_base | 100.0 % [15.8, 100.0] (2/2) |" in result.output
    assert "| bfcl-ground-truth@none | no-repair | multi_turn_base | 100.0 % [15.8, 100.0] (2/2) |" in result.output
    calls = sum(len(turn) for case in _cases("multi_turn_base")[:2] for turn in case.ground_truth)
    assert f"| bfcl-ground-truth@none | no-repair | multi_turn_base | 2 | 8 → 8 | {calls} → {calls} | 0 → 0 |" in (
        result.output
    )
    corpus = list(read_corpus(tmp_path / "gt" / CORPUS_NAME))
    assert sorted((Cell.from_key(r.cell).cut, r.case_id) for r in corpus) == [
        ("full", "multi_turn_base_0"),
        ("full", "multi_turn_base_1"),
        ("no-repair", "multi_turn_base_0"),
        ("no-repair", "multi_turn_base_1"),
    ]
    assert all(r.extra["passed"] and r.extra["transcripts"] for r in corpus)
    bad = runner.invoke(app, [*args, "--cuts", "no-parser", "--run-dir", str(tmp_path / "bad")])
    assert bad.exit_code == 2
    assert "unknown cut 'no-parser'" in bad.output
    single = runner.invoke(app, ["bench", "bfcl", "--categories", "simple_python", "--cuts", "no-repair"])
    assert single.exit_code == 2
    assert "--cuts applies to the multi-turn categories" in single.output
