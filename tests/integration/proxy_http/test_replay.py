"""vLLM and OpenRouter payloads from tests/fixtures/wire replayed by the upstream, read through the proxy by the SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from tooldispatch.proxy.scripted import Canned

from .conftest import ASK, WEATHER, Running, scripted_proxy
from .test_streaming import streamed_calls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def replaying(running: Running, name: str) -> dict[str, Any]:
    """Have the upstream answer the next request with the recorded exchange ``name``; return the fixture."""
    fixture: dict[str, Any] = json.loads((WIRE / f"{name}.json").read_text())
    running.upstream.canned.append(
        Canned(fixture["status"], fixture["body"].encode(), fixture["content_type"], fixture.get("headers", {}))
    )
    return fixture


def sdk(running: Running) -> openai.OpenAI:
    """An ``openai`` client pointed at the proxy."""
    return openai.OpenAI(base_url=running.url, api_key="x", max_retries=0)


def calls_of(message: Any) -> list[tuple[str, Any]]:
    """(name, arguments) of a message's tool calls."""
    return [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]


def test_vllm_bare_json_content_becomes_tool_calls(tmp_path: Path) -> None:
    """vLLM's hermes parser returned the call as content: the proxy answers it as a tool call, content emptied."""
    with scripted_proxy(tmp_path, dialect="vllm") as running:
        replaying(running, "vllm/hermes_bare_json_content")
        answer = sdk(running).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        rows = running.counted(1)
    message = answer.choices[0].message
    assert calls_of(message) == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert message.content is None
    assert answer.choices[0].finish_reason == "tool_calls"
    assert (message.model_extra or {})["reasoning_content"] == "The user wants the weather in Paris."
    assert rows == [(200, None, "server", 1)]


def test_vllm_bare_json_content_stream_becomes_tool_calls(tmp_path: Path) -> None:
    """The same in a stream: the bare JSON split across content chunks goes out as one tool_calls delta."""
    with scripted_proxy(tmp_path, dialect="vllm") as running:
        replaying(running, "vllm/hermes_bare_json_content_stream")
        calls, content, reasoning, finish = streamed_calls(sdk(running), model="m", messages=ASK, tools=[WEATHER])
    assert calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert (content, reasoning, finish) == ("", "The user wants the weather in Paris.", "tool_calls")


def test_vllm_native_tool_call_stream(tmp_path: Path) -> None:
    """vLLM's own streamed tool_calls (arguments split across chunks) come through as two validated calls."""
    with scripted_proxy(tmp_path, dialect="vllm") as running:
        replaying(running, "vllm/tool_calls_stream")
        calls, _, reasoning, finish = streamed_calls(sdk(running), model="m", messages=ASK, tools=[WEATHER])
    assert calls == [
        ("get_weather", {"city": "Paris", "unit": "celsius"}),
        ("get_weather", {"city": "Lyon", "unit": "celsius"}),
    ]
    assert (reasoning, finish) == ("Two cities, two calls.", "tool_calls")


def test_openrouter_tool_call_response(tmp_path: Path) -> None:
    """OpenRouter's answer (reasoning, reasoning_details, a native call) comes through with both reasoning fields."""
    with scripted_proxy(tmp_path, dialect="openrouter") as running:
        replaying(running, "openrouter/tool_calls_response")
        answer = sdk(running).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
    message = answer.choices[0].message
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    extra = message.model_extra or {}
    assert extra["reasoning"] == extra["reasoning_content"] == "The user wants Paris weather."
    assert answer.usage is not None and answer.usage.total_tokens == 211


def test_openrouter_error_inside_a_200_stream_reaches_the_sdk(tmp_path: Path) -> None:
    """OpenRouter's in-stream error (HTTP 200, finish_reason error) ends the proxied stream with an error event."""
    with scripted_proxy(tmp_path, dialect="openrouter") as running:
        replaying(running, "openrouter/error_in_stream")
        content: list[str] = []
        with pytest.raises(openai.APIError) as info:
            for chunk in sdk(running).chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True):  # type: ignore[list-item]
                content.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "".join(content) == "9.8"
    assert "Provider disconnected unexpectedly" in info.value.message


def test_openrouter_out_of_credits_is_402(tmp_path: Path) -> None:
    """OpenRouter's 402 reaches the client as a 402 saying to add credits."""
    with scripted_proxy(tmp_path, dialect="openrouter") as running:
        replaying(running, "openrouter/out_of_credits_402")
        with pytest.raises(openai.APIStatusError) as info:
            sdk(running).chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
    assert info.value.status_code == 402
    assert "out of credits" in info.value.message
