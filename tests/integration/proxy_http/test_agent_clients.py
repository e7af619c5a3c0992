"""Agent frameworks (openai-agents, smolagents, LangChain) completing a two-tool task through the proxy, to the
final answer, streamed and not, each sending its requests as it does in use (smolagents: content as parts)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.scripted import ScriptedTurn

from .conftest import scripted_proxy
from .test_clients import FINAL, RESULTS, two_tools

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def weather(city: str) -> str:
    return RESULTS["get_weather"]


def local_time(city: str) -> str:
    return RESULTS["get_time"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_agents_runner_completes_a_two_tool_task(tmp_path: Path, stream: bool) -> None:
    """openai-agents' Runner with OpenAIChatCompletionsModel runs both tools and ends with the final answer."""
    agents = pytest.importorskip("agents", reason="openai-agents is in the dev extras")
    import openai

    agents.set_tracing_disabled(True)
    ran: list[tuple[str, str]] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(("get_weather", city))
        return weather(city)

    @agents.function_tool
    def get_time(city: str) -> str:
        """Local time in a city."""
        ran.append(("get_time", city))
        return local_time(city)

    with scripted_proxy(tmp_path, script=two_tools) as running:
        client = openai.AsyncOpenAI(base_url=running.url, api_key="unused", max_retries=0)
        model = agents.OpenAIChatCompletionsModel(model="scripted", openai_client=client)
        agent = agents.Agent(name="assistant", instructions="Answer.", model=model, tools=[get_weather, get_time])

        async def run() -> Any:
            if not stream:
                return (await agents.Runner.run(agent, "Paris now?", max_turns=5)).final_output
            result = agents.Runner.run_streamed(agent, "Paris now?", max_turns=5)
            async for _ in result.stream_events():
                pass
            return result.final_output

        output = asyncio.run(run())
    assert ran == [("get_weather", "Paris"), ("get_time", "Paris")]
    assert output == FINAL


def two_tools_then_final_answer(body: Mapping[str, Any]) -> ScriptedTurn:
    """``two_tools``, except that with both results in hand it calls smolagents' ``final_answer`` tool."""
    text = json.dumps(body.get("messages"))
    if "22 C" in text and "14:05" in text:
        call = {"name": "final_answer", "arguments": {"answer": FINAL}}
        return ScriptedTurn(content=f"<tool_call>\n{json.dumps(call)}\n</tool_call>", chunk=6)
    return two_tools(body)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_smolagents_tool_calling_agent_completes_a_two_tool_task(tmp_path: Path, stream: bool) -> None:
    """smolagents' ToolCallingAgent (content sent as parts) runs both tools, then answers with final_answer."""
    smolagents = pytest.importorskip("smolagents", reason="smolagents is in the dev extras")

    import httpx2

    ran: list[tuple[str, str]] = []
    sent: list[dict[str, Any]] = []

    def record(request: httpx2.Request) -> None:
        sent.append(json.loads(request.read()))

    @smolagents.tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: the city.
        """
        ran.append(("get_weather", city))
        return weather(city)

    @smolagents.tool
    def get_time(city: str) -> str:
        """Local time in a city.

        Args:
            city: the city.
        """
        ran.append(("get_time", city))
        return local_time(city)

    with scripted_proxy(tmp_path, script=two_tools_then_final_answer) as running:
        model = smolagents.OpenAIServerModel(
            model_id="scripted",
            api_base=running.url,
            api_key="unused",
            client_kwargs={"max_retries": 0, "http_client": httpx2.Client(event_hooks={"request": [record]})},
        )
        agent = smolagents.ToolCallingAgent(
            tools=[get_weather, get_time], model=model, max_steps=4, stream_outputs=stream, verbosity_level=0
        )
        output = agent.run("Paris now?")
    assert ran == [("get_weather", "Paris"), ("get_time", "Paris")]
    assert output == FINAL
    assert len(sent) == 3
    task = sent[0]["messages"][1]
    assert task["role"] == "user" and task["content"][0]["type"] == "text"
    assert "Paris now?" in task["content"][0]["text"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_langchain_chat_openai_with_bound_tools_completes_a_two_tool_task(tmp_path: Path, stream: bool) -> None:
    """LangChain's ChatOpenAI with both tools bound, in a plain tool loop, runs them and gets the final answer."""
    pytest.importorskip("langchain_openai", reason="langchain-openai is in the dev extras")
    from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    ran: list[tuple[str, str]] = []

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(("get_weather", city))
        return weather(city)

    @tool
    def get_time(city: str) -> str:
        """Local time in a city."""
        ran.append(("get_time", city))
        return local_time(city)

    tools = {"get_weather": get_weather, "get_time": get_time}
    with scripted_proxy(tmp_path, script=two_tools) as running:
        llm = ChatOpenAI(model="scripted", base_url=running.url, api_key="unused", max_retries=0)  # type: ignore[arg-type]
        bound = llm.bind_tools(list(tools.values()))
        messages: list[BaseMessage] = [HumanMessage("Paris now?")]
        for _ in range(4):
            if stream:
                reply: Any = None
                for chunk in bound.stream(messages):
                    reply = chunk if reply is None else reply + chunk
            else:
                reply = bound.invoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                result = tools[call["name"]].invoke(call["args"])
                messages.append(ToolMessage(result, tool_call_id=call["id"]))
    assert ran == [("get_weather", "Paris"), ("get_time", "Paris")]
    assert reply.content == FINAL
