"""Real upstreams: llama-cpp-python's own server with SmolLM2, and SmolLM2 in process, behind the proxy.

SmolLM2-135M does not call tools by itself, so these requests use ``tool_choice`` ``required`` or a named
tool: the proxy asks the upstream for grammar-constrained decoding (GBNF) and the model's call comes back as
a native ``tool_calls`` entry that satisfies the request's schema.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.profiles import (
    backend_from_profile,
    load_profile,
    plan_launch,
    start_server,
    stop_server,
    wait_until_ready,
)
from tooldispatch.proxy import Upstream
from tooldispatch.proxy.scripted import ScriptedServer
from tooldispatch.proxy.upstream import from_backend, in_process

from .conftest import ASK, WEATHER, Running, running_proxy
from .test_streaming import streamed_calls

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
_UNUSED = ScriptedServer(lambda body: None)  # type: ignore[arg-type, return-value]  # no scripted upstream here


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """llama-cpp-python's OpenAI server with SmolLM2, launched from the shipped profile; yields its port."""
    port = free_port()
    plan = plan_launch(load_profile("local-llama-cpp-python"), model_path=str(smollm2_path), port=port)
    log = tmp_path_factory.mktemp("logs") / "server.log"
    process = start_server(plan, log_path=log)
    try:
        wait_until_ready(plan, process, log_path=log, timeout_s=180)
        yield port
    finally:
        stop_server(process)


@pytest.fixture
def server_proxy(llama_server: int, tmp_path: Path) -> Iterator[Running]:
    """The proxy in front of that server, built from the same profile (client parse mode)."""
    profile = load_profile("local-llama-cpp-python")
    backend = backend_from_profile(profile, port=llama_server)
    assert isinstance(backend, OpenAICompatBackend)
    upstream = from_backend(backend, model_spec=profile.model)
    with running_proxy(upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
        yield running


@pytest.fixture(scope="module")
def smollm2_upstream(smollm2_path: Path) -> Iterator[Upstream]:
    """SmolLM2 in process (the model loads once for the module)."""
    upstream = in_process(str(smollm2_path), manifest="smollm2-135m-instruct", n_ctx=2048, n_threads=2)
    yield upstream
    upstream.backend.close()  # type: ignore[attr-defined]


def sdk(running: Running) -> openai.OpenAI:
    """An ``openai`` client pointed at the proxy."""
    return openai.OpenAI(base_url=running.url, api_key="unused", max_retries=0, timeout=300)


def call_of(answer: Any) -> tuple[str, dict[str, Any]]:
    """The one tool call of an answer, checked against the weather tool's schema."""
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert call.id.startswith("call_") and call.type == "function"
    assert isinstance(arguments.get("city"), str)
    assert set(arguments) <= {"city", "unit"}
    return call.function.name, arguments


def test_openai_sdk_gets_a_tool_call_from_llama_cpp_python_server(server_proxy: Running) -> None:
    """tool_choice required against llama-cpp-python's server: a grammar-constrained call, answered natively."""
    answer = sdk(server_proxy).chat.completions.create(
        model="smollm2",
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        max_tokens=96,  # type: ignore[list-item]
    )
    assert call_of(answer)[0] == "get_weather"


def test_streamed_call_from_llama_cpp_python_server(server_proxy: Running) -> None:
    """The same request streamed: one complete tool_calls delta and finish_reason tool_calls."""
    calls, _, _, finish = streamed_calls(
        sdk(server_proxy),
        model="smollm2",
        messages=ASK,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=96,
    )
    assert finish == "tool_calls"
    assert [name for name, _ in calls] == ["get_weather"]
    assert isinstance(calls[0][1]["city"], str)


def test_plain_request_is_forwarded_to_llama_cpp_python_server(server_proxy: Running) -> None:
    """Without tools the request goes to the server as sent and its answer comes back."""
    answer = sdk(server_proxy).chat.completions.create(model="smollm2", messages=ASK, max_tokens=8)
    assert answer.choices[0].message.content
    assert answer.choices[0].finish_reason in ("stop", "length")
    assert server_proxy.counted(1)[0][2] == "forward"


def test_pydantic_ai_agent_completes_through_llama_cpp_python_server(server_proxy: Running) -> None:
    """A pydantic-ai agent with a structured output gets it from SmolLM2 through the proxy (a constrained call)."""
    pytest.importorskip("pydantic_ai")
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    class City(BaseModel):
        city: str

    model = OpenAIChatModel("smollm2", provider=OpenAIProvider(base_url=server_proxy.url, api_key="unused"))
    agent = Agent(model, output_type=City, model_settings={"max_tokens": 96})
    result = agent.run_sync("Which city is the capital of France?")
    assert isinstance(result.output, City) and result.output.city
    assert server_proxy.counted(1)[0][3] == 1


def test_in_process_model_answers_a_constrained_call(smollm2_upstream: Upstream, tmp_path: Path) -> None:
    """The proxy with SmolLM2 in process is itself an OpenAI server: a required call, streamed and not, and text."""
    with running_proxy(smollm2_upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
        client = sdk(running)
        whole = client.chat.completions.create(
            model="smollm2",
            messages=ASK,
            tools=[WEATHER],
            tool_choice="required",
            max_tokens=96,  # type: ignore[list-item]
        )
        calls, _, _, finish = streamed_calls(
            client, model="smollm2", messages=ASK, tools=[WEATHER], tool_choice="required", max_tokens=96
        )
        text = client.chat.completions.create(model="smollm2", messages=ASK, max_tokens=8)
        rows = running.counted(3)
    assert call_of(whole) == calls[0]  # same seed, same prompt, same grammar: the same call
    assert finish == "tool_calls"
    assert text.choices[0].message.content
    assert [(r[0], r[2]) for r in rows] == [(200, "in-process")] * 3


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_in_process_model_reads_content_parts_and_the_developer_role(
    smollm2_upstream: Upstream, tmp_path: Path, stream: bool
) -> None:
    """Content as lists of text parts (smolagents' and Qwen Code's form) and a developer message reach the GGUF's
    chat template as text: an answer, not a 500."""
    messages = [
        {"role": "developer", "content": [{"type": "text", "text": "Answer in one word."}]},
        {"role": "user", "content": [{"type": "text", "text": "Say hi"}]},
    ]
    with running_proxy(smollm2_upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
        client = sdk(running)
        if stream:
            chunks = list(
                client.chat.completions.create(model="smollm2", messages=messages, max_tokens=8, stream=True)  # type: ignore[arg-type]
            )
            assert chunks[-1].choices[0].finish_reason in ("stop", "length")
        else:
            answer = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=8)  # type: ignore[arg-type]
            assert answer.choices[0].finish_reason in ("stop", "length")
            assert answer.choices[0].message.content


def test_in_process_context_overflow_is_a_400_and_the_budget_is_clamped(
    smollm2_upstream: Upstream, tmp_path: Path
) -> None:
    """A prompt over the 2,048-token window is 400 context_length_exceeded with the counts and --n-ctx named;
    a prompt that fits with a large max_tokens is answered with the budget cut to the room left, in a header."""
    with running_proxy(smollm2_upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
        url = f"{running.url}/chat/completions"
        huge = [{"role": "user", "content": "word " * 3000}]
        refused = httpx2.post(url, json={"model": "m", "messages": huge}, timeout=120)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["code"] == "context_length_exceeded"
        assert "2048 tokens" in error["message"] and "--n-ctx" in error["message"]
        assert "create the backend" not in error["message"]
        long = [{"role": "user", "content": "word " * 1500 + "Say hi."}]
        fits = httpx2.post(url, json={"model": "m", "messages": long, "max_tokens": 32768}, timeout=300)
        assert fits.status_code == 200, fits.text
        budget = int(fits.headers["x-tooldispatch-completion-budget"])
        usage = fits.json()["usage"]
        assert budget == 2048 - usage["prompt_tokens"] and usage["completion_tokens"] <= budget
