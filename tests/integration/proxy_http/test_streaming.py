"""Streaming through the proxy with the ``openai`` SDK: the same calls as without streaming, cancellation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from tooldispatch.backends.scripted import ScriptedTurn

from .conftest import ASK, HERMES_CALL, WEATHER, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def streamed_calls(sdk: openai.OpenAI, **kwargs: Any) -> tuple[list[tuple[str, Any]], str, str, str | None]:
    """Stream a request; return its calls, content, reasoning and finish reason, put together from the deltas."""
    calls: dict[int, dict[str, Any]] = {}
    content, reasoning, finish = [], [], None
    for chunk in sdk.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content.append(delta.content or "")
        reasoning.append((delta.model_extra or {}).get("reasoning_content") or "")
        for call in delta.tool_calls or []:
            slot = calls.setdefault(call.index, {"name": "", "arguments": ""})
            slot["name"] += call.function.name or ""  # type: ignore[union-attr]
            slot["arguments"] += call.function.arguments or ""  # type: ignore[union-attr]
        finish = choice.finish_reason or finish
    pairs = [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    return pairs, "".join(content), "".join(reasoning), finish


SHAPES = [
    f"Let me check.\n{HERMES_CALL}",
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "[get_weather(city='Rome', unit='fahrenheit')]",
    f"{HERMES_CALL}\n{HERMES_CALL.replace('Paris', 'Lyon')}",
    "No call needed: it is sunny.",
]


@pytest.mark.parametrize("text", SHAPES)
def test_streamed_and_non_streamed_answers_carry_the_same_calls(tmp_path: Path, text: str) -> None:
    """Through the real proxy and SDK, a stream and a whole answer of the same output carry the same calls."""
    with scripted_proxy(tmp_path, script=lambda body: ScriptedTurn(content=text, reasoning="hmm", chunk=3)) as running:
        sdk = openai.OpenAI(base_url=running.url, api_key="x", max_retries=0)
        whole = sdk.chat.completions.create(model="s", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        calls, _, reasoning, finish = streamed_calls(sdk, model="s", messages=ASK, tools=[WEATHER])
    expected = [(c.function.name, json.loads(c.function.arguments)) for c in whole.choices[0].message.tool_calls or []]  # type: ignore[union-attr]
    assert calls == expected
    assert finish == whole.choices[0].finish_reason
    assert reasoning == "hmm"


def _wait_for(predicate: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("with_tools", [True, False])
def test_client_disconnect_cancels_the_upstream_request(tmp_path: Path, with_tools: bool) -> None:
    """A client that goes away mid-stream ends the upstream's stream too (parsed and forwarded requests alike)."""
    slow = ScriptedTurn(content="word " * 400, chunk=5)
    with scripted_proxy(tmp_path, script=lambda body: slow) as running:
        running.upstream.delay_s = 0.05
        body: dict[str, Any] = {"model": "s", "messages": ASK, "stream": True}
        if with_tools:
            body["tools"] = [WEATHER]
        with (
            httpx2.Client(timeout=10) as http,
            http.stream("POST", f"{running.url}/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            seen = b""
            for part in response.iter_bytes():
                seen += part
                if seen.count(b"word") >= 2:
                    break
        assert _wait_for(lambda: running.upstream.cancelled == 1)
        rows = running.counted(1)
    assert [row[:2] for row in rows] == [(499, "client_disconnected")]


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the SDK's own warning on the broken chunk
def test_a_broken_upstream_stream_ends_with_an_error_event_the_sdk_raises(tmp_path: Path) -> None:
    """A malformed chunk mid-stream becomes an OpenAI error event; the SDK raises it, nothing hangs."""
    from tooldispatch.proxy.scripted import Canned

    good = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "s"}
    chunk = {**good, "choices": [{"index": 0, "delta": {"content": "Hello "}, "finish_reason": None}]}
    broken = {**good, "choices": "not a list"}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(broken)}\n\ndata: [DONE]\n\n".encode()
    with scripted_proxy(tmp_path) as running:
        running.upstream.canned.append(Canned(200, body, "text/event-stream"))
        sdk = openai.OpenAI(base_url=running.url, api_key="x", max_retries=0)
        seen: list[str] = []
        with pytest.raises(openai.APIError) as info:
            for part in sdk.chat.completions.create(model="s", messages=ASK, tools=[WEATHER], stream=True):  # type: ignore[list-item]
                seen.append((part.choices[0].delta.content or "") if part.choices else "")
        rows = running.counted(1)
    assert "".join(seen) == "Hello "
    assert "choices are not a list" in info.value.message
    assert [row[:2] for row in rows] == [(502, "upstream_error")]


def test_reasoning_end_reaches_the_client_before_the_held_call(tmp_path: Path) -> None:
    """Over HTTP, the empty content delta that ends the reasoning arrives while the call is still being written."""
    turn = ScriptedTurn(reasoning="Think.", reasoning_s=0.0, content=HERMES_CALL, chunk=4)
    with scripted_proxy(tmp_path, script=lambda body: turn) as running:
        running.upstream.delay_s = 0.02
        sdk = openai.OpenAI(base_url=running.url, api_key="x", max_retries=0)
        order: list[str] = []
        for chunk in sdk.chat.completions.create(model="s", messages=ASK, tools=[WEATHER], stream=True):  # type: ignore[list-item]
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if (delta.model_extra or {}).get("reasoning_content"):
                order.append("reasoning")
            elif delta.tool_calls:
                order.append("call")
            elif delta.content == "" and delta.role is None:
                order.append("reasoning_end")
    assert order == ["reasoning", "reasoning", "reasoning_end", "call"]
