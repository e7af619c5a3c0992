"""The agent benchmarks against a served model: `bench bfcl` multi-turn and `bench suite`, `--backend openai_compat`.

The server is the package's scripted OpenAI-compatible upstream on 127.0.0.1. For BFCL it plays the first
`multi_turn_base` case's ground truth (the same script the `--ground-truth` replay uses), so the conversation must
pass BFCL's checker through HTTP, the agent and the dispatcher, in both cuts run; for the suite it answers every
task in words, so each task runs to a text answer and fails the world's check.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldispatch.agent import Budget
from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.corpus import CORPUS_NAME, Cell, read_corpus
from tooldispatch.bench.multiturn import ground_truth_backend
from tooldispatch.cli import app
from tooldispatch.errors import ConfigError
from tooldispatch.proxy.scripted import ScriptedServer, serve_in_thread

pytestmark = pytest.mark.integration


def _first_case() -> bfcl.MultiTurnCase:
    try:
        return bfcl.load_multi_turn("multi_turn_base")[0]
    except ConfigError as exc:  # the wheel could not be fetched (no PyPI access)
        pytest.skip(str(exc))


def _served(args: list[str], url: str) -> list[str]:
    return [*args, "--backend", "openai_compat", "--dialect", "llama-server", "--base-url", url]


def _model_requests(case: bfcl.MultiTurnCase) -> int:
    """The requests one replay of the ground truth makes: in each user turn, one per output with calls (at most the
    agent's calls per turn in one) and one for the answer that ends the turn."""
    per = Budget().max_calls_per_turn
    return sum((len(turn) + per - 1) // per + 1 for turn in case.ground_truth)


def test_multi_turn_runs_through_a_served_model_and_passes_the_checker(tmp_path: Path) -> None:
    case = _first_case()
    truth = ground_truth_backend(case)
    assert callable(truth.turns)
    play = truth.turns

    def script(body: Mapping[str, Any]) -> ScriptedTurn:
        return play(ChatRequest(messages=body["messages"]))

    server = ScriptedServer(script=script, model="qwen-served")
    args = ["bench", "bfcl", "--categories", "multi_turn_base", "--limit", "1", "--models", "qwen-served"]
    args += ["--quant-label", "nvfp4", "--cuts", "full,strict-parsing", "--run-dir", str(tmp_path / "mt")]
    with serve_in_thread(server.app()) as running:
        result = CliRunner().invoke(app, _served(args, f"{running.url}/v1"))
    assert result.exit_code == 0, result.output
    records = sorted(read_corpus(tmp_path / "mt" / CORPUS_NAME), key=lambda r: r.cell)
    assert [(Cell.from_key(r.cell).backend, Cell.from_key(r.cell).cut, r.case_id) for r in records] == [
        ("openai", "full", case.id),
        ("openai", "strict-parsing", case.id),
    ]
    assert all(r.extra["passed"] for r in records)
    assert "| qwen-served@nvfp4 | multi_turn_base | 100.0 % [2.5, 100.0] (1/1) |" in result.output
    assert len(server.requests) == 2 * _model_requests(case)
    # Client parse mode: the tools are in the system prompt the client renders, not in the body's `tools`.
    assert all(body["model"] == "qwen-served" and "tools" not in body for body in server.requests)
    assert all('<tools>\n{"type": "function"' in body["messages"][0]["content"] for body in server.requests)


def test_the_suite_runs_through_a_served_model(tmp_path: Path) -> None:
    server = ScriptedServer(script=lambda body: ScriptedTurn(content="I cannot do that."), model="qwen-served")
    args = ["bench", "suite", "--models", "qwen-served", "--run-dir", str(tmp_path / "suite")]
    with serve_in_thread(server.app()) as running:
        result = CliRunner().invoke(app, _served(args, f"{running.url}/v1"))
    assert result.exit_code == 0, result.output
    records = list(read_corpus(tmp_path / "suite" / CORPUS_NAME))
    assert len(records) == 6
    assert {Cell.from_key(r.cell).backend for r in records} == {"openai"}
    assert not any(r.extra["passed"] for r in records)
    assert len(server.requests) == 6
