"""OpenAICompatBackend against replayed wire fixtures: request bodies, events, errors, and key hygiene."""

from __future__ import annotations

import socket

import pytest

from tooldispatch.backends.base import (
    Backend,
    ChatRequest,
    ContentDelta,
    Event,
    Finish,
    NativeCall,
    ReasoningDelta,
    ReasoningEnd,
    Usage,
    collect,
)
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import BackendUnavailable, ConfigError, ProviderError, RateLimited
from tooldispatch.prompting import get_format, tool_call_grammar
from tooldispatch.toolspec import ToolSpec

from .conftest import WireServer, load_fixture, untimed

SECRET = "sk-or-v1-test-secret-0123456789"
ROUTE = {"only": ["deepinfra"], "quantizations": ["fp8"], "allow_fallbacks": False, "require_parameters": True}
WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK = ChatRequest(messages=[{"role": "user", "content": "What is the capital of France? Answer in one word."}])


def openrouter(server: WireServer, monkeypatch: pytest.MonkeyPatch) -> OpenAICompatBackend:
    """An OpenRouter-dialect backend pointed at the replay server, with a fake key in the environment."""
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    return OpenAICompatBackend(
        base_url=server.url,
        model="qwen/qwen3-32b",
        dialect="openrouter",
        api_key_env="OPENROUTER_API_KEY",
        provider=ROUTE,
        profile="openrouter",
    )


async def drain(backend: OpenAICompatBackend, request: ChatRequest, *, stream: bool = True) -> list[Event]:
    """All events of one turn, timestamps zeroed."""
    events = backend.stream(request) if stream else backend.complete(request)
    return untimed([e async for e in events])


async def test_llama_cpp_python_recorded_stream(wire_server: WireServer) -> None:
    """A recorded llama-cpp-python stream replays into content deltas and a final Finish."""
    wire_server.serve("llama_cpp_python/plain_stream")
    pieces = ["The", " capital", " of", " France", " is", " Paris", "."]
    async with OpenAICompatBackend(base_url=wire_server.url, model="smollm2", dialect="llama-server") as backend:
        events = await drain(backend, ASK)
    assert events == untimed([ContentDelta(p) for p in pieces] + [Finish("stop", model="smollm2")])


async def test_llama_cpp_python_recorded_response(wire_server: WireServer) -> None:
    """The recorded non-streaming answer yields one content event, usage and Finish."""
    wire_server.serve("llama_cpp_python/plain")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="smollm2", dialect="llama-server")
    assert await drain(backend, ASK, stream=False) == untimed(
        [
            ContentDelta("The capital of France is Paris."),
            Usage(prompt_tokens=42, completion_tokens=7),
            Finish("stop", model="smollm2"),
        ]
    )
    assert wire_server.requests[0]["stream"] is False
    assert "stream_options" not in wire_server.requests[0]


async def test_stream_request_asks_for_usage_on_local_dialects(wire_server: WireServer) -> None:
    """Streaming requests to vLLM / llama-server carry ``stream_options.include_usage``."""
    wire_server.serve("vllm/reasoning_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="qwen3", dialect="vllm")
    await drain(backend, ChatRequest(messages=ASK.messages, seed=7, stop=("</s>",)))
    assert wire_server.requests[0] == {
        "model": "qwen3",
        "messages": list(ASK.messages),
        "max_tokens": 512,
        "temperature": 0.0,
        "seed": 7,
        "stop": ["</s>"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_llama_server_body_keeps_the_prompt_cache_and_leaves_the_slot_to_the_server() -> None:
    """llama-server requests ask for ``cache_prompt`` and name no ``id_slot`` (the server picks the slot sharing
    the longest prefix); a profile's ``extra_body`` pins a slot or turns caching off; other dialects send neither."""
    request = ChatRequest(messages=ASK.messages)
    plain = OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", model="m", dialect="llama-server")
    pinned = OpenAICompatBackend(
        base_url="http://127.0.0.1:9/v1",
        model="m",
        dialect="llama-server",
        extra_body={"id_slot": 1, "cache_prompt": False},
    )
    vllm = OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", model="m", dialect="vllm")
    assert plain.request_body(request, stream=True)[1] == {"cache_prompt": True}
    assert pinned.request_body(request, stream=True)[1] == {"id_slot": 1, "cache_prompt": False}
    assert vllm.request_body(request, stream=True)[1] == {}


async def test_server_parse_mode_sends_tools(wire_server: WireServer) -> None:
    """``parse="server"`` sends ``tools`` and maps a tool name to a named ``tool_choice``."""
    wire_server.serve("llama_cpp_python/tool_calls_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="smollm2", dialect="llama-server", parse="server")
    request = ChatRequest(messages=ASK.messages, tools=(WEATHER,), tool_choice="get_weather")
    await drain(backend, request)
    sent = wire_server.requests[0]
    assert sent["tools"] == [WEATHER.to_openai()]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["messages"] == list(ASK.messages)
    assert backend.capabilities.native_tools is True


async def test_client_parse_mode_puts_tools_in_the_system_message(wire_server: WireServer) -> None:
    """``parse="client"`` sends no ``tools``; the declarations go into the system message instead."""
    wire_server.serve("llama_cpp_python/plain_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="smollm2", dialect="llama-server", parse="client")
    request = ChatRequest(messages=[{"role": "system", "content": "Be brief."}, *ASK.messages], tools=(WEATHER,))
    await drain(backend, request)
    sent = wire_server.requests[0]
    assert "tools" not in sent
    assert "tool_choice" not in sent
    assert sent["messages"][0] == {
        "role": "system",
        "content": "Be brief.\n\n" + get_format("hermes").system([WEATHER]),
    }
    assert sent["messages"][1:] == list(ASK.messages)
    assert backend.capabilities.native_tools is False


async def test_openrouter_body_carries_routing_and_events_carry_cost(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenRouter requests pin the provider route; the key travels only in the Authorization header."""
    wire_server.serve("openrouter/reasoning_stream")
    backend = openrouter(wire_server, monkeypatch)
    events = await drain(backend, ASK)
    assert events == untimed(
        [
            ReasoningDelta("Compare 9.80"),
            ReasoningDelta(" with 9.11."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=20, completion_tokens=30, cost=0.0000123),
            Finish("stop", model="qwen/qwen3-32b", provider="DeepInfra"),
        ]
    )
    sent = wire_server.requests[0]
    assert sent["provider"] == ROUTE
    assert sent["usage"] == {"include": True}
    assert "stream_options" not in sent
    assert wire_server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert wire_server.headers[0]["x-openrouter-title"] == "tooldispatch"


async def test_openrouter_error_inside_200_stream(wire_server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error event inside an HTTP 200 stream raises ProviderError with the code, after the content so far."""
    wire_server.serve("openrouter/error_in_stream")
    backend = openrouter(wire_server, monkeypatch)
    seen: list[Event] = []
    with pytest.raises(ProviderError) as info:
        async for event in backend.stream(ASK):
            seen.append(event)
    assert untimed(seen) == untimed([ContentDelta("9.8")])
    assert str(info.value) == (
        f"the openrouter endpoint at {wire_server.url} reported an error inside an HTTP 200 stream: "
        "code 'server_error': Provider disconnected unexpectedly"
    )


async def test_429_becomes_rate_limited_with_retry_after(
    wire_server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP 429 raises RateLimited whose ``retry_after`` comes from the Retry-After header."""
    wire_server.serve("openrouter/rate_limited_429")
    with pytest.raises(RateLimited) as info:
        await drain(openrouter(wire_server, monkeypatch), ASK)
    assert info.value.retry_after == 7.0
    assert info.value.status == 429
    assert info.value.retryable is True


async def test_503_names_the_routing_constraints(wire_server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP 503 from OpenRouter raises ProviderError naming the provider route that nothing satisfied."""
    wire_server.serve("openrouter/no_provider_503")
    with pytest.raises(ProviderError) as info:
        await drain(openrouter(wire_server, monkeypatch), ASK)
    assert info.value.status == 503
    assert str(info.value) == (
        f"no provider at {wire_server.url} satisfies the routing constraints provider="
        '{"allow_fallbacks": false, "only": ["deepinfra"], "quantizations": ["fp8"], "require_parameters": true} '
        "(HTTP 503: No endpoints found that can handle the requested parameters.); "
        "loosen 'only' or 'quantizations', or allow fallbacks"
    )


async def test_402_says_out_of_credits(wire_server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP 402 raises a non-retryable ProviderError saying the account is out of credits."""
    wire_server.serve("openrouter/out_of_credits_402")
    with pytest.raises(ProviderError) as info:
        await drain(openrouter(wire_server, monkeypatch), ASK, stream=False)
    assert info.value.status == 402
    assert info.value.retryable is False
    assert "out of credits (HTTP 402: Insufficient credits." in str(info.value)


async def test_401_names_the_key_variable_not_the_key(wire_server: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP 401 names the environment variable holding the key and never the key itself."""
    wire_server.serve("openrouter/unauthorized_401")
    with pytest.raises(ProviderError) as info:
        await drain(openrouter(wire_server, monkeypatch), ASK)
    assert info.value.status == 401
    assert str(info.value) == (
        f"the openrouter endpoint at {wire_server.url} rejected the key in $OPENROUTER_API_KEY "
        "(HTTP 401: No auth credentials found); set a valid key and try again"
    )
    assert SECRET not in str(info.value)


def test_backend_satisfies_the_backend_protocol() -> None:
    """OpenAICompatBackend is a ``Backend`` (capabilities and stream) and names its engine per dialect."""
    engines = {
        dialect: OpenAICompatBackend(base_url="http://127.0.0.1:1/v1", model="m", dialect=dialect)
        for dialect in ("vllm", "llama-server")
    }
    assert all(isinstance(b, Backend) for b in engines.values())
    assert {d: b.capabilities.engine for d, b in engines.items()} == {"vllm": "vllm", "llama-server": "llama.cpp"}


def test_repr_never_shows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """``repr(backend)`` names the key's variable, not its value."""
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    backend = OpenAICompatBackend(
        base_url="https://openrouter.ai/api/v1", model="m", dialect="openrouter", api_key_env="OPENROUTER_API_KEY"
    )
    assert repr(backend) == (
        "OpenAICompatBackend(base_url='https://openrouter.ai/api/v1', model='m', dialect='openrouter', "
        "parse='client', tool_format='hermes', api_key_env='OPENROUTER_API_KEY')"
    )
    assert SECRET not in repr(vars(backend))


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unset key variable fails at construction with a message naming the variable."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        OpenAICompatBackend(
            base_url="https://openrouter.ai/api/v1",
            model="m",
            dialect="openrouter",
            api_key_env="OPENROUTER_API_KEY",
            profile="openrouter",
        )
    assert str(info.value) == "the openrouter backend needs an API key: set the environment variable OPENROUTER_API_KEY"


def test_unknown_dialect_is_a_config_error() -> None:
    """A dialect outside vllm / llama-server / openrouter is refused with the valid names."""
    with pytest.raises(ConfigError) as info:
        OpenAICompatBackend(base_url="http://127.0.0.1:1/v1", model="m", dialect="ollama")  # type: ignore[arg-type]
    assert str(info.value) == "unknown dialect 'ollama'; use one of vllm, llama-server, openrouter"


async def test_closed_port_is_backend_unavailable_with_the_serve_hint() -> None:
    """A closed port raises BackendUnavailable naming the URL and the serve command."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    backend = OpenAICompatBackend(base_url=url, model="m", dialect="llama-server", profile="local-llama-cpp-python")
    with pytest.raises(BackendUnavailable) as info:
        await drain(backend, ASK)
    message = str(info.value)
    assert message.startswith(f"cannot reach the llama-server endpoint at {url} (")
    assert message.endswith("; start it with `tooldispatch serve --profile local-llama-cpp-python`")


async def test_constrained_client_mode_sends_the_tool_grammar(wire_server: WireServer) -> None:
    """On llama-server in client mode, ``constrained`` sends the tool format's GBNF grammar in the body."""
    wire_server.serve("llama_cpp_python/plain_stream")
    backend = OpenAICompatBackend(
        base_url=wire_server.url, model="smollm2", dialect="llama-server", tool_format="hermes_list"
    )
    assert backend.capabilities.constrained is True
    await drain(backend, ChatRequest(messages=ASK.messages, tools=(WEATHER,), constrained=True))
    assert wire_server.requests[0]["grammar"] == tool_call_grammar([WEATHER], "hermes_list", tool_choice="auto")


async def test_constrained_is_ignored_where_the_dialect_cannot(wire_server: WireServer) -> None:
    """vLLM reports no constrained capability and sends no grammar field."""
    wire_server.serve("vllm/reasoning_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="qwen3", dialect="vllm")
    assert backend.capabilities.constrained is False
    await drain(backend, ChatRequest(messages=ASK.messages, tools=(WEATHER,), constrained=True))
    assert "grammar" not in wire_server.requests[0]


def test_unknown_tool_format_is_a_config_error() -> None:
    """An unknown tool format fails at construction and lists the known ones."""
    with pytest.raises(ConfigError) as info:
        OpenAICompatBackend(base_url="http://127.0.0.1:1/v1", model="m", dialect="vllm", tool_format="xml")
    assert str(info.value) == (
        "unknown tool format 'xml'; choose one of hermes, hermes_list, json, pythonic, gemma_tool_code"
    )


async def test_vllm_tool_call_stream_through_the_client(wire_server: WireServer) -> None:
    """vLLM's split tool-call deltas, replayed over HTTP, collect into two whole calls after the reasoning."""
    wire_server.serve("vllm/tool_calls_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="qwen3", dialect="vllm", parse="server")
    done = await collect(backend.stream(ChatRequest(messages=ASK.messages, tools=(WEATHER,))))
    assert done.reasoning == "Two cities, two calls."
    assert done.native_calls == (
        NativeCall(id="chatcmpl-tool-a1", name="get_weather", arguments='{"city": "Paris", "unit": "celsius"}'),
        NativeCall(id="chatcmpl-tool-b2", name="get_weather", arguments='{"city": "Lyon", "unit": "celsius"}'),
    )
    assert done.finish_reason == "tool_calls"
    assert done.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (240, 61)


async def test_llama_server_reasoning_stream_through_the_client(wire_server: WireServer) -> None:
    """llama-server's ``reasoning_content`` stream, replayed over HTTP, gives reasoning, its end, content, usage."""
    wire_server.serve("llama_server/reasoning_content_stream")
    backend = OpenAICompatBackend(base_url=wire_server.url, model="qwen3", dialect="llama-server")
    assert await drain(backend, ASK) == untimed(
        [
            ReasoningDelta("9.80 versus 9.11"),
            ReasoningDelta(": the first is larger."),
            ReasoningEnd(),
            ContentDelta("9.8 is greater."),
            Usage(prompt_tokens=18, completion_tokens=20),
            Finish("stop", model="Qwen3-30B-A3B-Q4_K_M.gguf"),
        ]
    )


async def test_connection_dropped_mid_stream_says_so(wire_server: WireServer) -> None:
    """A stream cut off after some chunks raises BackendUnavailable saying the answer was cut, after its events."""
    body = load_fixture("llama_cpp_python/plain_stream")["body"]
    first_two = body.index("data: ", body.index("data: ", 1) + 1)
    wire_server.serve_cut("llama_cpp_python/plain_stream", after_bytes=len(body[:first_two].encode()))
    backend = OpenAICompatBackend(base_url=wire_server.url, model="smollm2", dialect="llama-server")
    seen: list[Event] = []
    with pytest.raises(BackendUnavailable) as info:
        async for event in backend.stream(ASK):
            seen.append(event)
    assert untimed(seen) == untimed([ContentDelta("The")])
    assert str(info.value).startswith(
        f"the connection to the llama-server endpoint at {wire_server.url} dropped in the middle of the answer ("
    )


def test_tool_prompt_follows_the_tools_given() -> None:
    """render_tools answers each tuple with its own text: a kept text is never given for other tools."""
    backend = OpenAICompatBackend(base_url="http://127.0.0.1:9/v1", model="m", dialect="llama-server")
    first = backend.render_tools((WEATHER,))
    other = ToolSpec(name="get_time", parameters={"type": "object", "properties": {}})
    assert first == get_format("hermes").system([WEATHER])
    assert backend.render_tools((WEATHER, other)) == get_format("hermes").system([WEATHER, other])
    assert backend.render_tools([other]) == get_format("hermes").system([other])
    renamed = ToolSpec(name="get_forecast", description=WEATHER.description, parameters=WEATHER.parameters)
    assert backend.render_tools((renamed,)) == get_format("hermes").system([renamed])
    assert backend.render_tools((WEATHER,)) == first
