"""Greedy outputs of the in-process backend are the same with and without the prefix-state cache.

The same interleaved conversations run on each packaged model (SmolLM2-135M and the tool-calling
Qwen2.5-Coder-0.5B) built from the default profile with the cache off (the baseline, computed once per model),
on, and bounded below one state. ``tooldispatch bench prefix`` compares longer prompts the same way and prints
whether every answer matched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.base import ChatRequest, ContentDelta
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.backends.prefix_cache import PrefixStats
from tooldispatch.bench.prefix import system_prompt
from tooldispatch.profiles import backend_from_profile

pytestmark = pytest.mark.integration


async def _answer(backend: LlamaCppBackend, messages: list[dict[str, Any]]) -> str:
    request = ChatRequest(messages=messages, max_tokens=8, temperature=0.0, seed=0)
    return "".join([ev.text async for ev in backend.stream(request) if isinstance(ev, ContentDelta)])


async def _interleaved(model_path: Path, prefix_cache_mb: int) -> tuple[list[str], PrefixStats]:
    """Two conversations taking turns, then an earlier turn of the first again; answers and cache counters."""
    backend = backend_from_profile("cpu-llamacpp", model=str(model_path), n_ctx=1024, prefix_cache_mb=prefix_cache_mb)
    assert isinstance(backend, LlamaCppBackend)
    convs = {
        name: [
            {"role": "system", "content": system_prompt(150, topic=topic)},
            {"role": "user", "content": "Which tool do you use first?"},
        ]
        for name, topic in (("a", "a parser"), ("b", "a scheduler"))
    }
    answers: list[str] = []
    try:
        for name in ("a", "b", "a", "b"):
            answer = await _answer(backend, convs[name])
            answers.append(answer)
            convs[name] = [*convs[name], {"role": "assistant", "content": answer}, {"role": "user", "content": "Why?"}]
        answers.append(await _answer(backend, convs["a"][:2]))  # the first turn of a again, after b
        return answers, backend.prefix_cache.stats()
    finally:
        backend.close()


@pytest.fixture(scope="module", params=["smollm2_path", "qwen_path"])
def model_path(request: pytest.FixtureRequest) -> Path:
    """Each packaged model's GGUF in turn: SmolLM2-135M, then the tool-calling Qwen2.5-Coder-0.5B."""
    path: Path = request.getfixturevalue(request.param)
    return path


@pytest.fixture(scope="module")
def baseline(model_path: Path) -> list[str]:
    """The answers with the cache off: only the last request's prefix is reused."""
    import asyncio

    answers, stats = asyncio.run(_interleaved(model_path, 0))
    assert (stats.saves, stats.restores) == (0, 0)
    return answers


async def test_answers_identical_with_the_cache_on(model_path: Path, baseline: list[str]) -> None:
    """With the cache on, every greedy answer equals the cache-off answer, and states were really restored."""
    answers, stats = await _interleaved(model_path, 64)
    assert answers == baseline
    assert stats.restores == 3
    assert 0 < stats.peak_bytes <= 64 * 1024 * 1024


async def test_answers_identical_with_a_bound_below_one_state(model_path: Path, baseline: list[str]) -> None:
    """Bounded below one state (1 MB), the cache keeps and restores nothing, and the answers are the same."""
    answers, stats = await _interleaved(model_path, 1)
    assert answers == baseline
    assert (stats.saves, stats.restores, stats.peak_bytes) == (0, 0, 0)
