"""Real clients (the ``openai`` SDK's own loop, pydantic-ai) completing a two-tool task through the proxy, to
the final answer, streamed and not, with content sent as parts as agent frameworks send it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import openai
import pytest

from tooldispatch.backends.scripted import ScriptedTurn

from .conftest import scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
]
FINAL = "In Paris it is sunny, 22 C, and 14:05."


def two_tools(body: Mapping[str, Any]) -> ScriptedTurn:
    """Weather first (in hermes tags), then the time (as bare JSON), then the answer from both results."""
    text = json.dumps(body.get("messages"))
    if "22 C" not in text:
        return ScriptedTurn(
            content='<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', chunk=6
        )
    if "14:05" not in text:
        return ScriptedTurn(content='{"name": "get_time", "arguments": {"city": "Paris"}}', chunk=6)
    return ScriptedTurn(content=FINAL, chunk=6)


RESULTS = {"get_weather": "sunny, 22 C", "get_time": "14:05"}


def _sdk_turn(client: openai.OpenAI, messages: list[dict[str, Any]], stream: bool) -> tuple[str, list[Any]]:
    """One turn with the SDK: the content and the calls, put together from the stream when streaming."""
    if not stream:
        message = client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS).choices[0].message  # type: ignore[arg-type]
        return message.content or "", list(message.tool_calls or [])
    content, calls = "", []
    for chunk in client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS, stream=True):  # type: ignore[arg-type]
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        calls += list(delta.tool_calls or [])
    return content, calls


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_loop_completes_a_two_tool_task(tmp_path: Path, stream: bool) -> None:
    """The SDK's client runs two calls (one repaired from bare JSON) and gets the final answer."""
    with scripted_proxy(tmp_path, script=two_tools) as running:
        client = openai.OpenAI(base_url=running.url, api_key="unused", max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Paris now?"}]}]
        ran: list[str] = []
        for _ in range(4):
            content, calls = _sdk_turn(client, messages, stream)
            if not calls:
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            for c in calls:
                ran.append(c.function.name)
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": c.id,
                        "content": [{"type": "text", "text": RESULTS[c.function.name]}],
                    }
                )
    assert ran == ["get_weather", "get_time"]
    assert content == FINAL


pydantic_ai = pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim[openai] is in the dev extras")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_pydantic_ai_agent_completes_a_two_tool_task(tmp_path: Path, stream: bool) -> None:
    """pydantic-ai's agent runs both tools through the proxy and ends with the model's final answer."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    ran: list[tuple[str, str]] = []
    with scripted_proxy(tmp_path, script=two_tools) as running:
        model = OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=running.url, api_key="unused"))
        agent = Agent(model)

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """Current weather for a city."""
            ran.append(("get_weather", city))
            return RESULTS["get_weather"]

        @agent.tool_plain
        def get_time(city: str) -> str:
            """Local time in a city."""
            ran.append(("get_time", city))
            return RESULTS["get_time"]

        if stream:

            async def run() -> str:
                async with agent.run_stream("Paris now?") as result:
                    return "".join([part async for part in result.stream_text(delta=True)])

            output = asyncio.run(run())
        else:
            output = agent.run_sync("Paris now?").output
    assert ran == [("get_weather", "Paris"), ("get_time", "Paris")]
    assert output == FINAL
