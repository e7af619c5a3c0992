"""The ``strix-halo-vulkan`` profile run for real: llama.cpp's Vulkan backend with every layer on a Vulkan device.

Where no Radeon is at hand the device is Mesa's lavapipe (Vulkan 1.3 on the CPU): the same llama.cpp code path as
on a Strix Halo up to the driver, one to two minutes a request. SmolLM2 keeps most tests short; one request runs
on the packaged Qwen2.5-Coder-0.5B.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tooldispatch.backends.base import ChatRequest, collect
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.profiles import backend_from_profile
from tooldispatch.toolspec import ToolSpec

from .conftest import VulkanServer

pytestmark = [pytest.mark.integration, pytest.mark.vulkan, pytest.mark.timeout(1800)]

WEATHER = ToolSpec(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def offloaded(log: Path) -> tuple[int, int, str]:
    """The layers llama.cpp put on the device, of how many, and the device its model buffer is on."""
    text = log.read_text(encoding="utf-8", errors="replace")
    layers = re.search(r"offloaded (\d+)/(\d+) layers to GPU", text)
    device = re.search(r"load_tensors:\s+(Vulkan\d+) model buffer size", text)
    assert layers is not None and device is not None, text[-3000:]
    return int(layers[1]), int(layers[2]), device[1]


def test_the_profile_puts_every_layer_on_the_vulkan_device(smollm2_vulkan: VulkanServer) -> None:
    """The log names the Vulkan device and says all layers (and the output layer) were offloaded to it."""
    done, total, device = offloaded(smollm2_vulkan.log)
    assert (done, device) == (total, "Vulkan0")
    assert total == 31  # SmolLM2-135M: 30 blocks and the output layer
    assert "using device Vulkan0" in smollm2_vulkan.log.read_text(encoding="utf-8", errors="replace")


async def test_a_tool_request_is_answered_in_server_parse_mode(smollm2_vulkan: VulkanServer) -> None:
    """Server parse mode (the profile's): llama-server renders the tools with the model's template and answers.

    SmolLM2's template has no tool section and llama-server does not enforce ``tool_choice: required`` for it, so
    the answer is text: the request is answered, whole, with its usage and a finish reason.
    """
    backend = backend_from_profile("strix-halo-vulkan", port=smollm2_vulkan.port, parse="server", timeout_s=900)
    request = ChatRequest(messages=ASK_WEATHER, tools=(WEATHER,), max_tokens=24, temperature=0.0)
    done = await collect(backend.stream(request))
    assert done.finish_reason in ("stop", "length")
    assert done.content.strip() and not done.native_calls
    assert done.usage is not None and done.usage.completion_tokens > 0


async def test_a_required_tool_call_is_made_in_client_parse_mode(smollm2_vulkan: VulkanServer) -> None:
    """Client parse mode with tool_choice required: llama-server's grammar makes the call, tooldispatch reads it."""
    backend = backend_from_profile("strix-halo-vulkan", port=smollm2_vulkan.port, parse="client", timeout_s=900)
    request = ChatRequest(
        messages=ASK_WEATHER, tools=(WEATHER,), max_tokens=48, tool_choice="required", constrained=True
    )
    done = await collect(backend.stream(request))
    outcome = parse_tool_calls(done.content, [WEATHER], finish_reason=done.finish_reason)
    assert [call.name for call in outcome.calls] == ["get_weather"]
    assert set(outcome.calls[0].arguments) == {"city"}


async def test_qwen_calls_the_tool_on_the_vulkan_device(qwen_vulkan: VulkanServer) -> None:
    """The packaged Qwen2.5-Coder-0.5B, every layer on the device, asked freely in the profile's parse mode.

    The model writes its call as fenced JSON, which llama-server leaves in the content; tooldispatch's parser
    takes it from there, as the agent does.
    """
    done_layers, total, device = offloaded(qwen_vulkan.log)
    assert (done_layers, total, device) == (25, 25, "Vulkan0")
    backend = backend_from_profile("strix-halo-vulkan", port=qwen_vulkan.port, parse="server", timeout_s=900)
    request = ChatRequest(messages=ASK_WEATHER, tools=(WEATHER,), max_tokens=64, temperature=0.0)
    done = await collect(backend.stream(request))
    outcome = parse_tool_calls(
        done.content, [WEATHER], native_calls=done.native_calls, finish_reason=done.finish_reason
    )
    assert [(call.name, dict(call.arguments)) for call in outcome.calls] == [("get_weather", {"city": "Paris"})]


def test_tooldispatch_runs_the_demo_task_against_the_vulkan_server(
    smollm2_vulkan: VulkanServer, tmp_path: Path
) -> None:
    """``tooldispatch run TASK --tools demo --profile strix-halo-vulkan`` talks to the server and ends as documented."""
    from tooldispatch.tools.demo import TASKS

    task = next(t for t in TASKS if t.id == "assign-north")
    argv = [
        sys.executable, "-m", "tooldispatch", "run", task.prompt, "--tools", "demo", "--profile", "strix-halo-vulkan",
        "--base-url", smollm2_vulkan.base_url, "--max-turns", "1", "--max-tokens", "48",
        "--store", str(tmp_path / "state.db"), "--json",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
    assert done.returncode in (0, 3, 6), done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert (record["profile"], record["exit_code"], record["error"]) == ("strix-halo-vulkan", done.returncode, None)
    assert len(record["turns"]) == 1 and record["turns"][0]["usage"]["completion_tokens"] > 0
