"""What the agent sends back after a call: the call once, as ``tool_calls``, answered by results with the same ids."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Registry
from tooldispatch.prompting.prompt import render_prompt
from tooldispatch.prompting.template import ChatTemplate

TEMPLATE = Path(__file__).parents[2] / "fixtures" / "templates" / "qwen2.5-coder.jinja"
BARE = '{"name": "list_drivers", "arguments": {"zone": "north"}}'


def _registry() -> Registry:
    reg = Registry()

    def list_drivers(zone: str) -> dict[str, Any]:
        return {"drivers": [{"id": "d-north-1", "zone": zone}]}

    reg.register(
        "list_drivers",
        list_drivers,
        description="Drivers of a zone",
        schema={"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
        read_only=True,
        concurrency_safe=True,
    )
    return reg


def _second_request(first: str) -> list[dict[str, Any]]:
    backend = ScriptedBackend([ScriptedTurn(content=first), ScriptedTurn(content="d-north-1 is in zone north.")])
    run = Agent(backend=backend, registry=_registry(), system_prompt="S", budget=Budget(max_turns=3)).run("Who?")
    assert run.end == "final_answer"
    return [dict(m) for m in backend.requests[1].messages]


RESULT = json.dumps({"drivers": [{"id": "d-north-1", "zone": "north"}]})


def test_a_call_recovered_from_content_goes_back_only_as_tool_calls() -> None:
    """Bare JSON (what vLLM's hermes parser leaves in content) is not kept as text beside the call it became."""
    messages = _second_request(BARE)
    call_id = messages[2]["tool_calls"][0]["id"]
    assert re.fullmatch(r"call_[0-9a-f]{16}", call_id)
    assert messages[2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "list_drivers", "arguments": '{"zone": "north"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": "list_drivers", "content": RESULT},
    ]


def test_prose_around_a_call_stays_as_content() -> None:
    """The text that is not a call (here the sentence before a fenced call) is kept; the fence is not."""
    messages = _second_request(f"Let me look.\n```json\n{BARE}\n```")
    assert messages[2]["content"] == "Let me look."
    assert [c["function"]["name"] for c in messages[2]["tool_calls"]] == ["list_drivers"]
    assert messages[3]["tool_call_id"] == messages[2]["tool_calls"][0]["id"]


def test_qwen_template_renders_the_call_once_then_its_result() -> None:
    """Through Qwen2.5's own template (vLLM and llama.cpp in process use it) the call appears exactly once."""
    messages = _second_request(f"```json\n{BARE}\n```")
    reg = _registry()
    prompt = render_prompt(
        ChatTemplate(TEMPLATE.read_text(encoding="utf-8")), messages, reg.specs(), tool_format="hermes"
    )
    turn = prompt.split("<|im_start|>user\nWho?<|im_end|>\n", 1)[1]
    assert turn == (
        "<|im_start|>assistant\n<tool_call>\n" + BARE + "\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n" + RESULT + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
