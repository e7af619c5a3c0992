"""The matrix runner: storing outputs, resuming, pausing on rate limits and dead servers."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.base import Capabilities, ChatRequest, Event
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import Cell
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import ModelFacts, RunOptions, Target, run_bfcl
from tooldispatch.errors import BackendUnavailable, ConfigError, ProviderError, RateLimited

FN = {
    "name": "get.weather",
    "description": "Weather for a city.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _cases(n: int) -> list[BfclCase]:
    return [
        BfclCase(
            id=f"simple_python_{i}",
            category="simple_python",
            messages=({"role": "user", "content": f"Weather in city {i}?"},),
            functions=(FN,),
            ground_truth=({"get.weather": {"city": [f"c{i}"]}},),
        )
        for i in range(n)
    ]


def _answer(request: ChatRequest) -> ScriptedTurn:
    city = str(request.messages[-1]["content"]).split()[-1].rstrip("?")
    return ScriptedTurn(content=f'<tool_call>{{"name": "get.weather", "arguments": {{"city": "c{city}"}}}}</tool_call>')


class Flaky:
    """Fails the first ``failures`` requests with ``error``, then answers like the scripted backend."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.inner = ScriptedBackend(turns=_answer)
        self.error = error
        self.failures = failures
        self.calls = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(engine="flaky", engine_version="1")

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        async for event in self.inner.stream(request):
            yield event


def _target(backend: Any, quant: str = "Q4_1") -> Target:
    return Target(
        cell=Cell(backend="scripted", model="m", quant=quant),
        make_backend=lambda: backend,
        facts=ModelFacts(family="f", tool_format="hermes_list", tensor_types={"Q4_1": 3}, model_file="m.gguf"),
    )


class FakeSleep:
    """Records pauses instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(round(seconds))


def _run(targets: list[Target], cases: list[BfclCase], db: ResultsDB, **kw: Any) -> Any:
    sleep = kw.pop("sleep", FakeSleep())
    return asyncio.run(run_bfcl(targets, cases, db, RunOptions(**kw), sleep=sleep))


def test_every_output_is_stored_with_its_provenance(tmp_path: Path) -> None:
    """Each (cell, case, seed) becomes one stored record with the raw text, model facts and engine."""
    db = ResultsDB(tmp_path)
    result = _run([_target(ScriptedBackend(turns=_answer))], _cases(3), db, seeds=(0, 1))
    records = sorted(db.records(), key=lambda r: (r.case_id, r.seed))
    assert (result.stored, result.skipped, result.failed) == (6, 0, [])
    assert [(r.case_id, r.seed) for r in records] == [(f"simple_python_{i}", s) for i in range(3) for s in (0, 1)]
    first = records[0]
    assert first.text == '<tool_call>{"name": "get.weather", "arguments": {"city": "c0"}}</tool_call>'
    assert (first.model, first.quant, first.engine, first.model_file) == ("m", "Q4_1", "scripted", "m.gguf")
    assert first.tensor_types == {"Q4_1": 3}
    assert first.finish_reason == "stop"
    assert first.extra["tool_format"] == "hermes_list"
    assert first.case["ground_truth"] == [{"get.weather": {"city": ["c0"]}}]


def test_a_rerun_runs_exactly_the_missing_cases(tmp_path: Path) -> None:
    """After an interrupted run, the same command runs only the (case, seed) pairs not yet stored."""
    cases = _cases(5)
    db = ResultsDB(tmp_path)
    first = ScriptedBackend(turns=_answer)
    _run([_target(first)], cases[:2], db)
    again = ScriptedBackend(turns=_answer)
    result = _run([_target(again)], cases, db)
    asked = [str(r.messages[-1]["content"]) for r in again.requests]
    assert asked == ["Weather in city 2?", "Weather in city 3?", "Weather in city 4?"]
    assert (result.stored, result.skipped, db.count()) == (3, 2, 5)


def test_a_renamed_run_folder_keeps_its_results_and_resumes(tmp_path: Path) -> None:
    """The folder is the run: moved under another name, it still reports every stored output and runs only the
    missing cases."""
    cases = _cases(4)
    first_dir = tmp_path / "first-name"
    db = ResultsDB(first_dir)
    _run([_target(ScriptedBackend(turns=_answer))], cases[:2], db)
    db.close()
    first_dir.rename(tmp_path / "second-name")
    moved = ResultsDB(tmp_path / "second-name")
    assert (moved.run_id, moved.count()) == ("first-name", 2)
    again = ScriptedBackend(turns=_answer)
    result = _run([_target(again)], cases, moved)
    assert [str(r.messages[-1]["content"]) for r in again.requests] == ["Weather in city 2?", "Weather in city 3?"]
    assert (result.stored, result.skipped, moved.count()) == (2, 2, 4)


def test_results_under_several_run_names_are_refused_with_the_merge(tmp_path: Path) -> None:
    """A folder an earlier version resumed under a new name holds two names: opening it says so and gives the
    statement that merges them; after it, the folder opens with every output."""
    cases = _cases(3)
    for name, part in (("old", cases[:2]), ("new", cases[2:])):
        db = ResultsDB(tmp_path / name)
        _run([_target(ScriptedBackend(turns=_answer))], part, db)
        db.close()
    with sqlite3.connect(tmp_path / "new" / "bench.db") as conn:
        conn.execute("ATTACH DATABASE ? AS old", (str(tmp_path / "old" / "bench.db"),))
        conn.execute("INSERT INTO bench_outputs SELECT * FROM old.bench_outputs")
    conn.close()
    with pytest.raises(ConfigError) as info:
        ResultsDB(tmp_path / "new")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'new' / 'bench.db'} holds results under several run names (new, old): ")
    statement = message.split(' "', 1)[1].rstrip('"')
    assert statement == "UPDATE OR REPLACE bench_outputs SET run_id = 'new'; DELETE FROM bench_runs WHERE id != 'new'"
    with sqlite3.connect(tmp_path / "new" / "bench.db") as conn:
        conn.executescript(statement)
    conn.close()
    merged = ResultsDB(tmp_path / "new")
    assert (merged.run_id, merged.count()) == ("new", 3)


def test_a_finished_cell_does_not_build_its_backend(tmp_path: Path) -> None:
    """A cell with nothing left to run never constructs its backend (no model load)."""
    db = ResultsDB(tmp_path)
    _run([_target(ScriptedBackend(turns=_answer))], _cases(2), db)
    built: list[str] = []

    def make() -> Any:
        built.append("built")
        return ScriptedBackend(turns=_answer)

    target = Target(cell=Cell(backend="scripted", model="m", quant="Q4_1"), make_backend=make)
    result = asyncio.run(run_bfcl([target], _cases(2), db, RunOptions()))
    assert (built, result.skipped, result.stored) == ([], 2, 0)


def test_rate_limit_pauses_for_retry_after_and_loses_nothing(tmp_path: Path) -> None:
    """A 429 with Retry-After pauses for that long, then the request succeeds and is stored."""
    db = ResultsDB(tmp_path)
    sleep = FakeSleep()
    backend = Flaky(RateLimited("slow down", retry_after=7.0), failures=2)
    result = _run([_target(backend)], _cases(1), db, sleep=sleep)
    assert (result.stored, result.pauses, result.failed) == (1, 2, [])
    assert sleep.waits == [7, 7]
    assert db.count() == 1


def test_dead_server_backs_off_then_leaves_the_case_for_the_next_run(tmp_path: Path) -> None:
    """A server that stays down is retried with doubling backoff; the case is not stored and runs next time."""
    db = ResultsDB(tmp_path)
    sleep = FakeSleep()
    backend = Flaky(BackendUnavailable("connection refused"), failures=99)
    result = _run([_target(backend)], _cases(1), db, sleep=sleep, max_attempts=4, backoff_s=1.0)
    assert sleep.waits == [1, 2, 4]
    assert result.failed == [
        ("scripted|m@Q4_1|client|free", "simple_python_0", 0, "BackendUnavailable: connection refused")
    ]
    assert db.count() == 0
    healthy = _run([_target(ScriptedBackend(turns=_answer))], _cases(1), db)
    assert (healthy.stored, db.count()) == (1, 1)


def test_a_refused_request_is_stored_as_an_error(tmp_path: Path) -> None:
    """A non-retryable 400 is stored once with its error (scored as wrong), not retried."""
    db = ResultsDB(tmp_path)
    backend = Flaky(ProviderError("context too long", status=400), failures=1)
    result = _run([_target(backend)], _cases(1), db)
    [record] = list(db.records())
    assert (result.stored, backend.calls) == (1, 1)
    assert record.error == "ProviderError: context too long"
    assert record.text == ""


def test_an_account_error_stops_the_run(tmp_path: Path) -> None:
    """A 402 (no credits) stops the whole run with the provider's error."""
    db = ResultsDB(tmp_path)
    backend = Flaky(ProviderError("insufficient credits", status=402), failures=99)
    with pytest.raises(ProviderError, match="insufficient credits"):
        _run([_target(backend)], _cases(3), db)
    assert db.count() == 0


def test_interleaved_cells_run_case_by_case(tmp_path: Path) -> None:
    """With interleave_cells, case i runs on every cell before case i+1 on any."""
    db = ResultsDB(tmp_path)
    order: list[str] = []
    backends = {q: ScriptedBackend(turns=_answer) for q in ("Q4_1", "Q8_0")}

    def hook(key: str, done: int, total: int) -> None:
        order.append(f"{key.split('|')[1]}:{done}/{total}")

    targets = [_target(backends["Q4_1"], "Q4_1"), _target(backends["Q8_0"], "Q8_0")]
    asyncio.run(run_bfcl(targets, _cases(2), db, RunOptions(), on_progress=hook, interleave_cells=True))
    assert order == ["m@Q4_1:1/2", "m@Q8_0:1/2", "m@Q4_1:2/2", "m@Q8_0:2/2"]


def test_concurrency_bounds_requests_in_flight(tmp_path: Path) -> None:
    """No more than ``concurrency`` requests are in flight at once."""
    db = ResultsDB(tmp_path)
    live = [0]
    peak = [0]

    class Slow(ScriptedBackend):
        async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            await asyncio.sleep(0.01)
            async for event in super().stream(request):
                yield event
            live[0] -= 1

    _run([_target(Slow(turns=_answer))], _cases(8), db, concurrency=3)
    assert (peak[0], db.count()) == (3, 8)


def test_session_keeps_every_command_and_refuses_other_settings(tmp_path: Path) -> None:
    """Each invocation's command is kept in the run's meta and report; a changed budget is refused."""
    from tooldispatch.bench.report import render_markdown, summarize
    from tooldispatch.bench.session import run_session
    from tooldispatch.errors import ConfigError

    meta = {"categories": ["simple_python"], "limit": 2, "max_tokens": 256, "temperature": 0.0, "seeds": [0]}
    cases = _cases(2)
    run_session(
        [_target(ScriptedBackend(turns=_answer))],
        cases[:1],
        tmp_path,
        RunOptions(),
        meta={**meta, "command": "a"},
        progress=False,
    )
    run_session(
        [_target(ScriptedBackend(turns=_answer), "Q8_0")],
        cases,
        tmp_path,
        RunOptions(),
        meta={**meta, "command": "b"},
        progress=False,
    )
    with pytest.raises(ConfigError, match="max_tokens=256"):
        run_session([], cases, tmp_path, RunOptions(), meta={**meta, "max_tokens": 64}, progress=False)
    db = ResultsDB(tmp_path)
    assert db.meta()["commands"] == ["a", "b"]
    assert db.meta()["cells"] == ["scripted|m@Q4_1|client|free", "scripted|m@Q8_0|client|free"]
    md = render_markdown(summarize(db.records(), meta=db.meta()), [], title="t")
    assert "```\na\nb\n```" in md
    assert (tmp_path / "corpus.jsonl").read_text().count("\n") == 3
