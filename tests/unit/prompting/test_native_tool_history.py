"""Qwen2.5's own template (from the Qwen2.5-Coder GGUF) renders the history of calls as the model wrote them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tooldispatch.prompting.prompt import native_messages, render_prompt
from tooldispatch.prompting.template import ChatTemplate
from tooldispatch.toolspec import normalize_tools

TEMPLATE = (Path(__file__).parents[2] / "fixtures" / "templates" / "qwen2.5-coder.jinja").read_text(encoding="utf-8")
TOOLS = list(
    normalize_tools(
        [{"name": "list_drivers", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}]
    ).values()
)
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Who drives in zone north?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "list_drivers", "arguments": '{"zone": "north"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c0", "name": "list_drivers", "content": '{"drivers": ["d-north-1"]}'},
]


def test_call_arguments_render_as_an_object_not_a_quoted_string() -> None:
    """An earlier call's JSON-string arguments come back as the object the model wrote, result in a user turn."""
    prompt = render_prompt(ChatTemplate(TEMPLATE), HISTORY, TOOLS, tool_format="hermes")
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "list_drivers", "arguments": {"zone": "north"}}\n</tool_call>'
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n"
        '{"drivers": ["d-north-1"]}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
    ) in prompt
    assert '"arguments": "{' not in prompt


def test_native_messages_leaves_other_messages_and_bad_json_alone() -> None:
    """Messages without calls are copied unchanged; arguments that are not JSON stay the string they were."""
    bad: dict[str, Any] = {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}
    out = native_messages([HISTORY[0], bad])
    assert out == [HISTORY[0], {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]
    assert native_messages(HISTORY[1:2])[0]["tool_calls"][0]["function"]["arguments"] == {"zone": "north"}
    assert HISTORY[1]["tool_calls"][0]["function"]["arguments"] == '{"zone": "north"}'
