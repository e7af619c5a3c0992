"""openai_compat against a real llama-cpp-python server on 127.0.0.1 with SmolLM2, in both parse modes."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tooldispatch.backends.base import ChatRequest, ContentDelta, Finish, ToolCallDelta, Usage, collect
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import BackendUnavailable
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.profiles import LaunchPlan, load_profile, plan_launch, start_server, stop_server, wait_until_ready
from tooldispatch.toolspec import ToolSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]
STORY = [{"role": "user", "content": "Write a long story about a dragon who learns to bake bread."}]


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_server(plan: LaunchPlan, log_path: Path) -> Iterator[str]:
    """Start a planned server, yield its base URL once /v1/models answers, stop it afterwards."""
    process = start_server(plan, log_path=log_path)
    try:
        wait_until_ready(plan, process, log_path=log_path, timeout_s=120)
        yield plan.base_url
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def template_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server with the GGUF's own chat template, launched from the shipped profile."""
    plan = plan_launch(load_profile("local-llama-cpp-python"), model_path=str(smollm2_path), port=free_port())
    yield from run_server(plan, tmp_path_factory.mktemp("logs") / "template.log")


@pytest.fixture(scope="module")
def functions_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's server with ``chatml-function-calling``, which returns native ``tool_calls``."""
    port = free_port()
    argv = (
        sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path), "--host", "127.0.0.1",
        "--port", str(port), "--n_ctx", "2048", "--chat_format", "chatml-function-calling",
    )  # fmt: skip
    plan = LaunchPlan(
        profile="functions", launcher="test", argv=argv, port=port, base_url=f"http://127.0.0.1:{port}/v1"
    )
    yield from run_server(plan, tmp_path_factory.mktemp("logs") / "functions.log")


def backend(url: str, parse: str) -> OpenAICompatBackend:
    """A llama-server-dialect backend for the given server and parse mode."""
    return OpenAICompatBackend(base_url=url, model="smollm2", dialect="llama-server", parse=parse)  # type: ignore[arg-type]


async def test_client_mode_stream_is_all_content(template_server: str) -> None:
    """Client parse mode streams the raw text as content deltas only, then Finish at the token limit."""
    request = ChatRequest(messages=STORY, tools=(WEATHER,), max_tokens=16)
    events = [e async for e in backend(template_server, "client").stream(request)]
    assert {type(e) for e in events[:-1]} == {ContentDelta}
    assert events[-1] == Finish("length", model="smollm2", t=events[-1].t)
    assert len(events) > 2


async def test_client_mode_complete_reports_usage(template_server: str) -> None:
    """Client parse mode without streaming: one content event, usage counting the tokens, Finish."""
    request = ChatRequest(messages=STORY, tools=(WEATHER,), max_tokens=16)
    events = [e async for e in backend(template_server, "client").complete(request)]
    assert [type(e) for e in events] == [ContentDelta, Usage, Finish]
    usage = events[1]
    assert isinstance(usage, Usage)
    assert usage.completion_tokens == 16
    assert events[2] == Finish("length", model="smollm2", t=events[2].t)


async def test_server_mode_streams_native_tool_call(functions_server: str) -> None:
    """Server parse mode: a named tool choice streams one native call, assembled whole."""
    request = ChatRequest(messages=ASK_WEATHER, tools=(WEATHER,), tool_choice="get_weather", max_tokens=32)
    done = await collect(backend(functions_server, "server").stream(request))
    assert len(done.native_calls) == 1
    call = done.native_calls[0]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert done.finish_reason == "tool_calls"
    assert done.content == ""


async def test_server_mode_complete_returns_native_tool_call(functions_server: str) -> None:
    """Server parse mode without streaming: the call, then usage, then Finish."""
    request = ChatRequest(messages=ASK_WEATHER, tools=(WEATHER,), tool_choice="get_weather", max_tokens=32)
    events = [e async for e in backend(functions_server, "server").complete(request)]
    assert [type(e) for e in events] == [ToolCallDelta, Usage, Finish]
    first = events[0]
    assert isinstance(first, ToolCallDelta)
    assert (first.index, first.name, json.loads(first.arguments)) == (0, "get_weather", {"city": "Paris"})


async def test_dead_server_is_backend_unavailable() -> None:
    """A closed port on loopback raises BackendUnavailable naming the URL."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(BackendUnavailable, match=f"^cannot reach the llama-server endpoint at {url} "):
        await collect(backend(url, "client").stream(ChatRequest(messages=ASK_WEATHER)))


def test_server_that_dies_at_start_reports_its_log(tmp_path: Path) -> None:
    """A server that exits before answering raises BackendUnavailable quoting its last log lines."""
    plan = plan_launch(
        load_profile("local-llama-cpp-python"), model_path=str(tmp_path / "missing.gguf"), port=free_port()
    )
    log_path = tmp_path / "server.log"
    process = start_server(plan, log_path=log_path)
    try:
        with pytest.raises(BackendUnavailable) as info:
            wait_until_ready(plan, process, log_path=log_path, timeout_s=120)
    finally:
        stop_server(process)
    message = str(info.value)
    assert message.startswith(
        f"the local-llama-cpp-python server exited with code 1 before answering on {plan.base_url}.\n"
    )
    assert message.endswith(f"ValueError: Model path does not exist: {tmp_path / 'missing.gguf'}")


async def test_constrained_client_mode_yields_a_valid_call(template_server: str) -> None:
    """Client mode with the tool grammar (tool_choice required): the raw text parses into a valid get_weather call."""
    live = OpenAICompatBackend(
        base_url=template_server, model="smollm2", dialect="llama-server", parse="client", tool_format="hermes_list"
    )
    request = ChatRequest(
        messages=ASK_WEATHER, tools=(WEATHER,), max_tokens=64, constrained=True, tool_choice="required"
    )
    done = await collect(live.stream(request))
    outcome = parse_tool_calls(done.content, [WEATHER], finish_reason=done.finish_reason)
    assert [call.name for call in outcome.calls] == ["get_weather"]
    assert set(outcome.calls[0].arguments) == {"city"}
