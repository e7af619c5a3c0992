"""llama.cpp's lazy grammar on Qwen2.5-Coder-0.5B: free until a declared call shape starts, bound from there."""

from __future__ import annotations

import ctypes
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.base import ChatRequest, collect
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.prompting.grammar import LazyGrammar, lazy_tool_call_grammar
from tooldispatch.toolspec import ToolSpec

pytestmark = pytest.mark.integration

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]},
)
SHAPES = ("json_fence", "bare_json")


@pytest.fixture(scope="module")
def vocab_llama(qwen_path: Path) -> Iterator[Any]:
    """The model's vocabulary alone, in the backend's ``Llama`` class (no weights loaded)."""
    from tooldispatch.backends._llama_lazy import LazyGrammarLlama

    llm = LazyGrammarLlama(model_path=str(qwen_path), vocab_only=True, verbose=False)
    yield llm
    llm.close()


def _grammar_sampler(llm: Any, grammar: LazyGrammar) -> tuple[Any, Any, list[bytes]]:
    """The backend's sampler chain for a lazy grammar: (the chain object, its grammar sampler, sampler names)."""
    import llama_cpp

    from tooldispatch.backends._llama_lazy import LazyLlamaGrammar

    sampler = llm._init_sampler(temp=0.0, grammar=LazyLlamaGrammar(grammar.text, grammar.trigger_patterns))
    chain = sampler.sampler
    names = [
        llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i))
        for i in range(llama_cpp.llama_sampler_chain_n(chain))
    ]
    return sampler, llama_cpp.llama_sampler_chain_get(chain, names.index(b"grammar")), names


def _allowed(llm: Any, grammar_sampler: Any, pieces: list[str]) -> list[bool]:
    """Which of these one-token pieces the grammar sampler lets through now."""
    import llama_cpp

    tokens = [llm.tokenize(p.encode(), add_bos=False, special=False) for p in pieces]
    assert all(len(t) == 1 for t in tokens), tokens
    data = (llama_cpp.llama_token_data * len(tokens))(*[llama_cpp.llama_token_data(t[0], 0.0, 0.0) for t in tokens])
    array = llama_cpp.llama_token_data_array(data, len(tokens), -1, False)
    llama_cpp.llama_sampler_apply(grammar_sampler, ctypes.byref(array))
    return [data[i].logit > -1e30 for i in range(len(tokens))]


def _after(llm: Any, text: str) -> list[bool]:
    """Feed ``text`` token by token to a fresh lazy grammar; which of ``Hello``, ``"``, ``}`` it then allows."""
    import llama_cpp

    sampler, grammar_sampler, _ = _grammar_sampler(llm, lazy_tool_call_grammar([WEATHER], "hermes", call_shapes=SHAPES))
    for token in llm.tokenize(text.encode(), add_bos=False, special=True):
        llama_cpp.llama_sampler_accept(grammar_sampler, token)
    allowed = _allowed(llm, grammar_sampler, ["Hello", '"', "}"])
    sampler.close()
    return allowed


def test_the_lazy_grammar_takes_the_eager_ones_place_in_the_chain(vocab_llama: Any) -> None:
    """The chain keeps the library's samplers and order; the grammar sampler sits where the eager one would."""
    import llama_cpp
    from llama_cpp.llama_grammar import LlamaGrammar

    eager = vocab_llama._init_sampler(temp=0.0, grammar=LlamaGrammar.from_string('root ::= "x"', verbose=False))
    eager_names = [
        llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(eager.sampler, i))
        for i in range(llama_cpp.llama_sampler_chain_n(eager.sampler))
    ]
    eager.close()
    lazy, _, names = _grammar_sampler(vocab_llama, lazy_tool_call_grammar([WEATHER], "hermes", call_shapes=SHAPES))
    lazy.close()
    assert names == eager_names == [b"?penalties", b"grammar", b"greedy"]


def test_text_before_a_trigger_is_free(vocab_llama: Any) -> None:
    """An answer, an unoffered name or a code fence leave every token open."""
    assert _after(vocab_llama, "The weather in Paris") == [True, True, True]
    assert _after(vocab_llama, '```json\n{\n  "name": "get_time",\n') == [True, True, True]
    assert _after(vocab_llama, "```python\nprint(1)\n") == [True, True, True]


def test_fenced_bare_and_tagged_calls_bind(vocab_llama: Any) -> None:
    """Once an offered name closes in a fence, a bare object or <tool_call>, only what the grammar takes is left."""
    assert _after(vocab_llama, '```json\n{\n  "name": "get_weather",\n  ') == [False, True, False]
    assert _after(vocab_llama, '{"name": "get_weather", "arguments": {') == [False, True, False]
    assert _after(vocab_llama, 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}') == [
        False,
        False,
        True,
    ]


def test_a_second_call_may_follow_the_first_a_line_apart(vocab_llama: Any) -> None:
    """After one whole call the grammar takes another on the next line, and nothing else but the end."""
    first = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    assert _after(vocab_llama, first + "\n") == [False, False, False]  # a call must start: none of these
    assert _after(vocab_llama, first + '\n{"name": "get_weather", "arguments": {') == [False, True, False]


async def test_constrained_auto_call_on_the_real_model_is_valid_json(qwen_path: Path) -> None:
    """Constrained auto on the model: its fenced call comes out as JSON the grammar admits, read as a call."""
    backend = LlamaCppBackend(qwen_path, manifest="qwen2.5-coder-0.5b-instruct", n_ctx=2048, n_threads=2)
    try:
        request = ChatRequest(
            messages=[{"role": "user", "content": "What is the weather in Paris for the next 3 days?"}],
            tools=[WEATHER],
            tool_choice="auto",
            constrained=True,
            temperature=0.0,
            max_tokens=96,
        )
        completion = await collect(backend.stream(request))
    finally:
        backend.close()
    text = completion.content
    body = text.removeprefix("```json\n").removesuffix("\n```") if text.startswith("```") else text
    assert json.loads(body)["name"] == "get_weather"
    outcome = parse_tool_calls(text, [WEATHER], tool_format="hermes")
    assert [c.name for c in outcome.calls] == ["get_weather"]
