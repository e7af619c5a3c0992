"""Dialect normalization: wire payloads from each server become the same events."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.backends.base import (
    ContentDelta,
    Event,
    Finish,
    NativeCall,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallDelta,
    Usage,
    collect,
)
from tooldispatch.backends.dialects import Dialect, StreamNormalizer, reasoning_text, response_events
from tooldispatch.errors import ProviderError

from .conftest import load_fixture, untimed

QWEN = "nvidia/Qwen3-30B-A3B-NVFP4"


def sse_chunks(body: str) -> list[dict[str, Any]]:
    """The JSON chunks of an SSE body (comments and ``[DONE]`` skipped)."""
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]


def replay(name: str, dialect: Dialect) -> list[Event]:
    """Normalize every chunk of a fixture's stream, then close it."""
    normalizer = StreamNormalizer(dialect)
    events: list[Event] = []
    for chunk in sse_chunks(load_fixture(name)["body"]):
        events.extend(normalizer.feed(chunk))
    events.extend(normalizer.finish())
    return untimed(events)


async def _aiter(events: list[Event]) -> Any:
    for e in events:
        yield e


def test_vllm_reasoning_field_becomes_reasoning_events() -> None:
    """vLLM's ``delta.reasoning`` turns into reasoning deltas, ended by the first content."""
    assert replay("vllm/reasoning_stream", "vllm") == untimed(
        [
            ReasoningDelta("Compare the decimals"),
            ReasoningDelta(": 9.8 is 9.80, and 9.80 > 9.11."),
            ReasoningEnd(),
            ContentDelta("\n\n"),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=18, completion_tokens=24),
            Finish("stop", model=QWEN),
        ]
    )


def test_vllm_older_reasoning_content_field_is_read() -> None:
    """Older vLLM releases' ``delta.reasoning_content`` gives the same events as ``reasoning``."""
    assert replay("vllm/reasoning_content_stream", "vllm") == untimed(
        [
            ReasoningDelta("9.8 is 9.80"),
            ReasoningDelta(", larger than 9.11."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Finish("stop", model=QWEN),
        ]
    )


def test_llama_server_reasoning_content_and_usage_in_final_chunk() -> None:
    """llama-server's ``reasoning_content`` is reasoning; usage riding on the finish chunk is kept."""
    assert replay("llama_server/reasoning_content_stream", "llama-server") == untimed(
        [
            ReasoningDelta("9.80 versus 9.11"),
            ReasoningDelta(": the first is larger."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=18, completion_tokens=20),
            Finish("stop", model="Qwen3-30B-A3B-Q4_K_M.gguf"),
        ]
    )


def test_openrouter_reasoning_and_details_counted_once_with_cost_and_provider() -> None:
    """OpenRouter's ``reasoning`` + ``reasoning_details`` with the same text yield it once; cost, provider kept."""
    assert replay("openrouter/reasoning_stream", "openrouter") == untimed(
        [
            ReasoningDelta("Compare 9.80"),
            ReasoningDelta(" with 9.11."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=20, completion_tokens=30, cost=0.0000123),
            Finish("stop", model="qwen/qwen3-32b", provider="DeepInfra"),
        ]
    )


def test_openrouter_reasoning_details_only() -> None:
    """A delta with only ``reasoning_details`` yields its summary text; an encrypted entry yields nothing."""
    assert replay("openrouter/reasoning_details_stream", "openrouter") == untimed(
        [
            ReasoningDelta("Compared the decimals."),
            ReasoningEnd(),
            ContentDelta("9.8"),
            Finish("stop", model="qwen/qwen3-32b", provider="DeepInfra"),
        ]
    )


def test_vllm_tool_call_deltas_split_across_chunks() -> None:
    """Two streamed calls keep their index, id and name once, and their argument fragments in order."""
    events = replay("vllm/tool_calls_stream", "vllm")
    assert events == untimed(
        [
            ReasoningDelta("Two cities, two calls."),
            ReasoningEnd(),
            ToolCallDelta(index=0, id="chatcmpl-tool-a1", name="get_weather", arguments=""),
            ToolCallDelta(index=0, arguments='{"city": "Pa'),
            ToolCallDelta(index=0, arguments='ris", "unit": "celsius"}'),
            ToolCallDelta(index=1, id="chatcmpl-tool-b2", name="get_weather", arguments=""),
            ToolCallDelta(index=1, arguments='{"city": "Lyon",'),
            ToolCallDelta(index=1, arguments=' "unit": "celsius"}'),
            Usage(prompt_tokens=240, completion_tokens=61),
            Finish("tool_calls", model=QWEN),
        ]
    )


async def test_llama_cpp_python_repeated_id_and_name_are_emitted_once() -> None:
    """llama-cpp-python repeats id and name on every delta; the collected call has the name once."""
    events = replay("llama_cpp_python/tool_calls_stream", "llama-server")
    done = await collect(_aiter(events))
    assert done.native_calls == (
        NativeCall(
            id="call__0_get_weather_cmpl-c4fc341a-d379-4e5d-99e0-9089c3b328b0",
            name="get_weather",
            arguments='{ "city": "Paris" }',
        ),
    )
    assert done.finish_reason == "tool_calls"
    assert sum(1 for e in events if isinstance(e, ToolCallDelta) and e.name) == 1


def test_think_tags_without_reasoning_field_stay_in_content() -> None:
    """With no reasoning field, ``<think>`` text is content, left for the parser to split."""
    normalizer = StreamNormalizer("llama-server")
    events = normalizer.feed({"choices": [{"index": 0, "delta": {"content": "<think>hm</think>Paris"}}]})
    events += normalizer.finish()
    assert untimed(events) == untimed([ContentDelta("<think>hm</think>Paris"), Finish(None)])


def test_in_stream_error_raises_provider_error_with_code() -> None:
    """An OpenRouter chunk with ``error`` (HTTP 200) raises ProviderError naming the code and provider."""
    chunks = sse_chunks(load_fixture("openrouter/error_in_stream")["body"])
    normalizer = StreamNormalizer("openrouter")
    assert untimed(normalizer.feed(chunks[0])) == untimed([ContentDelta("9.8")])
    with pytest.raises(ProviderError) as info:
        normalizer.feed(chunks[1])
    assert str(info.value) == (
        "the server reported an error inside an HTTP 200 response from provider DeepInfra: "
        "code 'server_error': Provider disconnected unexpectedly"
    )


def test_vllm_error_object_in_stream_raises() -> None:
    """vLLM's mid-stream ``{"object": "error", ...}`` payload raises ProviderError with its code."""
    normalizer = StreamNormalizer("vllm")
    with pytest.raises(ProviderError) as info:
        normalizer.feed({"object": "error", "message": "KV cache is full", "type": "InternalServerError", "code": 500})
    assert info.value.status == 500
    assert str(info.value) == "the server reported an error inside an HTTP 200 response: code 500: KV cache is full"


def test_finish_reason_error_without_details_raises() -> None:
    """``finish_reason: "error"`` with no error object still fails the turn."""
    normalizer = StreamNormalizer("openrouter")
    with pytest.raises(ProviderError, match="finish_reason 'error'"):
        normalizer.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]})


def test_reasoning_field_precedence_per_dialect() -> None:
    """Each dialect reads its own field first and takes only one field per delta."""
    both = {"reasoning": "new", "reasoning_content": "old"}
    assert reasoning_text(both, "vllm") == "new"
    assert reasoning_text(both, "llama-server") == "old"
    assert reasoning_text(both, "openrouter") == "new"
    assert reasoning_text({"content": "x"}, "vllm") == ""


def test_vllm_non_streaming_response_events() -> None:
    """A whole vLLM response yields reasoning, its end, content, usage and finish, like a stream."""
    body = json.loads(load_fixture("vllm/reasoning_response")["body"])
    assert untimed(response_events(body, "vllm")) == untimed(
        [
            ReasoningDelta("9.8 is 9.80, larger than 9.11."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=18, completion_tokens=22),
            Finish("stop", model=QWEN),
        ]
    )


def test_openrouter_non_streaming_tool_call_response() -> None:
    """A whole OpenRouter response with a tool call yields the call whole, with cost and provider."""
    body = json.loads(load_fixture("openrouter/tool_calls_response")["body"])
    assert untimed(response_events(body, "openrouter")) == untimed(
        [
            ReasoningDelta("The user wants Paris weather."),
            ReasoningEnd(),
            ToolCallDelta(index=0, id="call_7f3a", name="get_weather", arguments='{"city":"Paris"}'),
            Usage(prompt_tokens=180, completion_tokens=31, cost=0.0000412),
            Finish("tool_calls", model="qwen/qwen3-32b", provider="DeepInfra"),
        ]
    )


@pytest.mark.parametrize(
    ("payload", "what"),
    [
        ({"choices": {"delta": {}}}, "a stream chunk whose choices are not a list (dict: {'delta': {}})"),
        ({"choices": ["text"]}, "a stream chunk whose choice is not an object (str: 'text')"),
        ({"choices": [{"delta": "text"}]}, "a stream chunk whose delta is not an object (str: 'text')"),
        ({"choices": [{"message": 7}]}, "a response whose message is not an object (int: 7)"),
    ],
)
def test_a_payload_of_another_shape_is_a_provider_error_that_says_what_to_check(payload: Any, what: str) -> None:
    """A chunk or response not shaped as the API defines raises ProviderError naming the part, never a TypeError."""
    with pytest.raises(ProviderError) as caught:
        if what.startswith("a response"):
            response_events(payload, "vllm")
        else:
            StreamNormalizer("vllm").feed(payload)
    assert str(caught.value) == (
        f"the server sent {what}; check that the endpoint speaks the OpenAI chat completions API "
        "(a base URL ending in /v1)"
    )


def test_odd_counts_and_tool_call_lists_are_read_leniently() -> None:
    """Token counts given as digits or floats are read, others count 0; tool_calls that is not a list is skipped."""
    events = response_events(
        {
            "choices": [{"message": {"content": "ok", "tool_calls": 5}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": "12", "completion_tokens": 3.0, "cost": True},
        },
        "vllm",
    )
    assert untimed(events) == untimed([ContentDelta("ok"), Usage(12, 3, None), Finish("stop")])
    chunk = {"choices": [{"delta": {"content": "x", "tool_calls": {"index": 0}}}], "usage": {"prompt_tokens": "n/a"}}
    normalizer = StreamNormalizer("openrouter")
    assert untimed(normalizer.feed(chunk)) == untimed([ContentDelta("x")])
    assert untimed(normalizer.finish()) == untimed([Usage(0, 0, None), Finish(None)])


_KEYS = st.sampled_from(
    [
        "choices",
        "delta",
        "message",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "index",
        "id",
        "finish_reason",
        "usage",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "reasoning",
        "reasoning_content",
    ]
)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_KEYS | st.text(max_size=3), kids, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["choices", "usage", "model", "provider"]), _JSON), max_size=3))
def test_any_payload_gives_events_or_a_provider_error(payloads: list[dict[str, Any]]) -> None:
    """Whatever a server sends inside a 200 response, the normalizer answers with events or a ProviderError."""
    for dialect in ("vllm", "llama-server", "openrouter"):
        normalizer = StreamNormalizer(dialect)
        for payload in payloads:
            for read in (normalizer.feed, lambda p: response_events(p, dialect)):  # noqa: B023
                with contextlib.suppress(ProviderError):
                    read(payload)
        assert isinstance(normalizer.finish()[-1], Finish)
