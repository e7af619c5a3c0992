"""Greedy outputs of the in-process backend are the same with and without the prefix-state cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.base import ChatRequest, ContentDelta
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.bench.prefix import system_prompt

pytestmark = pytest.mark.integration


async def _answer(backend: LlamaCppBackend, messages: list[dict[str, Any]]) -> str:
    request = ChatRequest(messages=messages, max_tokens=12, temperature=0.0, seed=0)
    return "".join([ev.text async for ev in backend.stream(request) if isinstance(ev, ContentDelta)])


async def _interleaved(backend: LlamaCppBackend, approx_tokens: int) -> list[str]:
    """Three conversations, each turn after another conversation's, and one turn repeated after them all."""
    convs = {
        name: [
            {"role": "system", "content": system_prompt(approx_tokens, topic=topic)},
            {"role": "user", "content": "Which tool do you use first?"},
        ]
        for name, topic in (("a", "a parser"), ("b", "a scheduler"), ("c", "a storage layer"))
    }
    answers: list[str] = []
    for name in ("a", "b", "c", "a", "b", "c"):
        answer = await _answer(backend, convs[name])
        answers.append(answer)
        convs[name] = [*convs[name], {"role": "assistant", "content": answer}, {"role": "user", "content": "Why?"}]
    answers.append(await _answer(backend, convs["a"][:-2]))  # an earlier turn of a, after c
    return answers


async def test_smollm2_interleaved_outputs_identical_with_cache_off_on_and_tight(smollm2_path: Path) -> None:
    """SmolLM2: with the cache off, on, and bounded to about one state, every greedy answer is the same; the
    cache restores states when on and evicts them when tight."""
    results: dict[int, list[str]] = {}
    stats = {}
    for mb in (0, 64, 1):
        backend = LlamaCppBackend(smollm2_path, manifest="smollm2-135m-instruct", n_ctx=2048, prefix_cache_mb=mb)
        try:
            results[mb] = await _interleaved(backend, 250)
            stats[mb] = backend.prefix_cache.stats()
        finally:
            backend.close()
    assert results[64] == results[0]
    assert results[1] == results[0]
    assert (stats[0].saves, stats[0].restores) == (0, 0)
    assert stats[64].restores >= 4
    assert stats[64].peak_bytes <= 64 * 1024 * 1024
    assert stats[1].evictions >= 1 or stats[1].saves < stats[64].saves


async def test_qwen_interleaved_outputs_identical_with_and_without_cache() -> None:
    """Qwen2.5-Coder-0.5B (the tool-calling model): restored states give the same greedy answers as none."""
    from tooldispatch.models import pull

    path = pull("qwen2.5-coder-0.5b-instruct@Q4_K_M", progress=False)
    results: dict[int, list[str]] = {}
    restores = {}
    for mb in (0, 256):
        backend = LlamaCppBackend(path, manifest="qwen2.5-coder-0.5b-instruct", n_ctx=2048, prefix_cache_mb=mb)
        try:
            results[mb] = await _interleaved(backend, 150)
            restores[mb] = backend.prefix_cache.stats().restores
        finally:
            backend.close()
    assert results[256] == results[0]
    assert (restores[0], restores[256] >= 4) == (0, True)
