"""The proxy's routes with the ``openai`` SDK against a scripted upstream, both on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import openai
import pytest

from tooldispatch.backends.scripted import ScriptedTurn

from .conftest import ASK, WEATHER, Running, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def client(running: Running, key: str = "unused") -> openai.OpenAI:
    """An ``openai`` client pointed at the proxy."""
    return openai.OpenAI(base_url=running.url, api_key=key, max_retries=0)


def test_request_without_tools_is_forwarded_untouched(proxied: Running) -> None:
    """A request without tools reaches the upstream as sent (model renamed to the served one) and comes back as is."""
    body = {"model": "anything", "messages": ASK, "top_p": 0.25, "logit_bias": {"42": -1}, "custom_field": [1, 2]}
    response = httpx2.post(f"{proxied.url}/chat/completions", json=body, timeout=10)
    assert response.status_code == 200
    assert proxied.upstream.requests[-1] == {**body, "model": "scripted"}
    assert response.json()["choices"][0]["message"] == {"role": "assistant", "content": "Hello there, how can I help?"}


def test_streamed_request_without_tools_is_forwarded_byte_for_byte(proxied: Running) -> None:
    """A streamed request without tools gets the upstream's SSE bytes unchanged."""
    body = {"model": "scripted", "messages": ASK, "stream": True}
    via = httpx2.post(f"{proxied.url}/chat/completions", json=body, timeout=10).content
    chunks = [json.loads(line[6:]) for line in via.decode().split("\n\n") if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == (
        "Hello there, how can I help?"
    )
    assert via.endswith(b"data: [DONE]\n\n")
    assert proxied.upstream.requests[-1] == body


def test_tool_call_in_text_comes_back_as_native_tool_calls(proxied: Running) -> None:
    """A hermes call in the upstream's text is answered as an OpenAI tool call, repaired, with the rest as content."""
    answer = client(proxied).chat.completions.create(model="scripted", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("get_weather", {"city": "Paris", "unit": "celsius"})
    ]
    extra = choice.message.model_extra or {}
    assert extra["reasoning_content"] == extra["reasoning"] == "The user wants weather."


def test_client_mode_sends_the_tools_in_the_prompt_and_leaves_unset_fields_out(proxied: Running) -> None:
    """Client parse mode: no tools field upstream, the tool block in the system prompt, no invented sampling fields."""
    client(proxied).chat.completions.create(model="scripted", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
    sent = proxied.upstream.requests[-1]
    assert "tools" not in sent and "tool_choice" not in sent
    assert sent["messages"][0]["role"] == "system" and "get_weather" in sent["messages"][0]["content"]
    assert not {"max_tokens", "temperature", "seed"} & set(sent)


def test_client_mode_writes_earlier_calls_and_results_back_as_text(proxied: Running) -> None:
    """A conversation with an earlier call and its result reaches a client-mode upstream as plain text turns."""
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
    ]
    client(proxied).chat.completions.create(model="scripted", messages=history, tools=[WEATHER])  # type: ignore[arg-type, list-item]
    sent = proxied.upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert all(set(m) == {"role", "content"} for m in sent)
    assert '"city": "Paris"' in sent[2]["content"] and '{"temp": 21}' in sent[3]["content"]


def test_server_mode_sends_tools_and_parallel_flag(tmp_path: Path) -> None:
    """Server parse mode passes tools, tool_choice and parallel_tool_calls to the upstream."""
    with scripted_proxy(tmp_path, dialect="vllm") as running:
        client(running).chat.completions.create(
            model="scripted",
            messages=ASK,
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice="required",
            parallel_tool_calls=False,
        )
        sent = running.upstream.requests[-1]
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    assert sent["tool_choice"] == "required"
    assert sent["parallel_tool_calls"] is False


def test_parallel_tool_calls_false_answers_one_call(tmp_path: Path) -> None:
    """With parallel_tool_calls false only the first of two calls is answered."""
    two = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon"}}</tool_call>'
    )

    with scripted_proxy(tmp_path, script=lambda body: ScriptedTurn(content=two)) as running:
        sdk = client(running)
        both = sdk.chat.completions.create(model="s", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        one = sdk.chat.completions.create(model="s", messages=ASK, tools=[WEATHER], parallel_tool_calls=False)  # type: ignore[list-item]
    assert [json.loads(c.function.arguments)["city"] for c in both.choices[0].message.tool_calls or []] == [
        "Paris",
        "Lyon",
    ]  # type: ignore[union-attr]
    assert [json.loads(c.function.arguments)["city"] for c in one.choices[0].message.tool_calls or []] == ["Paris"]  # type: ignore[union-attr]


def test_tool_choice_none_answers_text_only(tmp_path: Path) -> None:
    """tool_choice none: the tools are not offered upstream and no call is extracted from the text."""
    with scripted_proxy(
        tmp_path, script=lambda body: ScriptedTurn(content='{"name": "get_weather", "arguments": {"city": "Paris"}}')
    ) as running:
        answer = client(running).chat.completions.create(
            model="s",
            messages=ASK,
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice="none",
        )
        sent = running.upstream.requests[-1]
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content == '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert "get_weather" not in json.dumps(sent["messages"])


def test_models_and_health(proxied: Running) -> None:
    """/v1/models lists the served model; /health says what the proxy serves."""
    assert [m.id for m in client(proxied).models.list()] == ["scripted"]
    health = httpx2.get(proxied.url.removesuffix("/v1") + "/health", timeout=5).json()
    assert health == {"status": "ok", "model": "scripted", "quant": "served", "engine": "llama.cpp", "mode": "client"}
