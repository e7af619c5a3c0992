"""Replay of a recorded corpus of real model outputs: deterministic, and equal to the recorded summary."""

from __future__ import annotations

import json
from pathlib import Path

from tooldispatch.bench.corpus import read_corpus
from tooldispatch.bench.replay import compare_summaries, replay_corpus

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
CORPUS = FIXTURES / "bfcl_smollm2_gemma3.jsonl"
RECORDED = json.loads((FIXTURES / "bfcl_smollm2_gemma3.summary.json").read_text())


def test_recorded_corpus_has_real_provenance() -> None:
    """Every recorded output names its model, quantization, real tensor types, engine and BFCL case."""
    records = list(read_corpus(CORPUS))
    assert len(records) == RECORDED_COUNT
    for r in records:
        assert r.engine == "llama.cpp"
        assert r.tensor_types and sum(r.tensor_types.values()) in (236, 272)
        assert r.case["id"] == r.case_id
        assert r.prompt_tokens > 0 and r.completion_tokens > 0


def test_replay_equals_the_summary_recorded_with_the_corpus() -> None:
    """Re-scoring the corpus with the current parser reproduces every rate of the recorded summary."""
    summary, _, count = replay_corpus(CORPUS)
    now = summary.to_dict()
    assert count == RECORDED_COUNT
    assert now["cells"] == RECORDED["cells"]
    assert now["differences"] == RECORDED["differences"]
    assert set(compare_summaries(RECORDED, now)) == {
        f"{c['label']} {m}: unchanged" for c in RECORDED["cells"] for m in ("accuracy", "false_positive")
    }


def test_replay_is_deterministic() -> None:
    """Two replays of the same corpus give identical summaries (seeded bootstrap, pure scoring)."""
    first, _, _ = replay_corpus(CORPUS)
    second, _, _ = replay_corpus(CORPUS)
    assert first.to_dict() == second.to_dict()


RECORDED_COUNT = sum(c["outputs"] for c in RECORDED["cells"])


LADDER = Path(__file__).resolve().parents[3] / "docs" / "results" / "qwen25-coder-ladder"


def test_the_benchmark_declares_its_tools_read_only_and_says_so() -> None:
    """The default policy makes every BFCL function read-only, and the summary and report name the policy."""
    from tooldispatch.bench.bfcl_data import BFCL_POLICY
    from tooldispatch.bench.report import render_markdown

    assert [(r.glob, r.read_only) for r in BFCL_POLICY.rules] == [("*", True)]
    summary, _, _ = replay_corpus(CORPUS)
    assert summary.meta["policy"] == BFCL_POLICY.source
    assert f"Tool policy (what the parser was told the tools are): {BFCL_POLICY.source}." in render_markdown(
        summary, [], title="t"
    )


def test_undeclared_tools_move_exactly_three_ladder_outputs() -> None:
    """Scored as undeclared, three ladder outputs differ: a fence after prose, a misspelled name, a cut call."""
    from tooldispatch.bench.scoring import score_output
    from tooldispatch.policy import ToolPolicy

    moved = []
    for record in read_corpus(LADDER / "corpus.jsonl"):
        if record.case.get("functions") is None:
            continue
        declared, undeclared = score_output(record), score_output(record, policy=ToolPolicy())
        if (declared.bucket, declared.correct) != (undeclared.bucket, undeclared.correct):
            moved.append((record.cell.split("|")[1], record.case_id, declared.bucket, undeclared.bucket,
                          declared.correct["repair"], undeclared.correct["repair"]))  # fmt: skip
    assert moved == [
        ("qwen2.5-coder-0.5b-instruct@BF16-from-Q4_K_M", "irrelevance_29", "ok_fallback", "Ambiguous", False, True),
        ("qwen2.5-coder-0.5b-instruct@Q4_0", "irrelevance_3", "Truncated", "Ambiguous", True, True),
        ("qwen2.5-coder-0.5b-instruct@IQ3_XXS", "simple_python_38", "repaired", "UnknownName", True, False),
    ]
