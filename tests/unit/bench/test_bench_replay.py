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
