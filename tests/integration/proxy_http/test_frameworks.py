"""An agent framework from PyPI (pydantic-ai) completing tool calls through the proxy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pytest

from tooldispatch.backends.scripted import ScriptedTurn

from .conftest import scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
pydantic_ai = pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim[openai] is in the dev extras")


def agent_model(url: str) -> Any:
    """pydantic-ai's OpenAI chat model pointed at the proxy."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel("scripted", provider=OpenAIProvider(base_url=url, api_key="unused"))


def weather_then_answer(body: Mapping[str, Any]) -> ScriptedTurn:
    """A model that calls get_weather in hermes tags (misspelling the unit's case), then answers from the result."""
    text = json.dumps(body.get("messages"))
    if "tool_response" in text:
        return ScriptedTurn(content="It is 21 degrees in Paris.")
    call = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "CELSIUS"}}
    return ScriptedTurn(content=f"<tool_call>\n{json.dumps(call)}\n</tool_call>", chunk=6)


@pytest.mark.parametrize("stream", [False, True])
def test_pydantic_ai_agent_runs_a_tool_through_the_proxy(tmp_path: Path, stream: bool) -> None:
    """The agent gets a native, repaired tool call from text the model wrote, runs its tool, and finishes."""
    from pydantic_ai import Agent

    seen: list[tuple[str, str]] = []
    with scripted_proxy(tmp_path, script=weather_then_answer) as running:
        agent = Agent(agent_model(running.url))

        @agent.tool_plain
        def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
            """Current weather for a city."""
            seen.append((city, unit))
            return json.dumps({"city": city, "temperature": 21, "unit": unit})

        if stream:

            async def run() -> str:
                async with agent.run_stream("Weather in Paris?") as result:
                    return "".join([part async for part in result.stream_text(delta=True)])

            output = asyncio.run(run())
        else:
            output = agent.run_sync("Weather in Paris?").output
        rows = running.counted(2)
    assert seen == [("Paris", "celsius")]
    assert output == "It is 21 degrees in Paris."
    assert [(status, calls) for status, _, _, calls in rows] == [(200, 1), (200, 0)]
