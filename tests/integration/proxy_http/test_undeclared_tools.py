"""A request's tools carry no metadata: through the proxy, prose that mentions a call yields no tool_calls in
any language, calls in the tool-call format still do, and ``--policy`` declares read-only tools."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from typer.testing import CliRunner

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.policy import ToolPolicy
from tooldispatch.proxy.translate import ToolCache

from .conftest import WEATHER, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

DELETE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "delete_file",
        "description": "Delete a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
PROSE = [
    "Previously I called delete_file(path='/tmp/x') and it failed.",
    "我不会调用 delete_file(path='/etc/passwd')。",
    "Ich werde delete_file(path='/home') nicht aufrufen.",
    "Je n'appellerai pas delete_file(path='/srv') sans votre accord.",
    "¿Quieres que ejecute delete_file(path='/var')?",
    'Ayer ejecuté <tool_call>{"name": "delete_file", "arguments": {"path": "/opt"}}</tool_call> y falló.',
    'Plan:\n<tool_call>{"name": "delete_file", "arguments": {"path": "/c"}}</tool_call>\nShall I proceed?',
]
DELIMITED = [
    '```json\n{"name": "delete_file", "arguments": {"path": "/tmp/x"}}\n```',
    'Deleting it now.\n<tool_call>\n{"name": "delete_file", "arguments": {"path": "/tmp/x"}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]',
    "[delete_file(path='/tmp/x')]",
]


def echo(body: Mapping[str, Any]) -> ScriptedTurn:
    """Answer with the text of the last user message, as a model that wrote it would."""
    return ScriptedTurn(content=str(body["messages"][-1]["content"]), chunk=5)


def _ask(url: str, text: str, tools: list[dict[str, Any]], *, stream: bool = False) -> dict[str, Any]:
    """The choice's message and finish reason (streamed answers reassembled)."""
    body = {"model": "m", "messages": [{"role": "user", "content": text}], "tools": tools, "stream": stream}
    response = httpx2.post(f"{url}/chat/completions", json=body, timeout=20)
    assert response.status_code == 200, response.text
    if not stream:
        choice = response.json()["choices"][0]
        calls = [
            (c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in choice["message"].get("tool_calls") or []
        ]
        return {"content": choice["message"].get("content"), "calls": calls, "finish": choice["finish_reason"]}
    chunks = [json.loads(line[6:]) for line in response.text.split("\n\n") if line.startswith("data: {")]
    content, args, names, finish = "", {}, {}, None
    for chunk in chunks:
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            content += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                fn = call.get("function", {})
                names[call["index"]] = names.get(call["index"], "") + (fn.get("name") or "")
                args[call["index"]] = args.get(call["index"], "") + (fn.get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    calls = [(names[i], json.loads(args[i])) for i in sorted(names)]
    return {"content": content or None, "calls": calls, "finish": finish}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_prose_about_a_call_yields_no_tool_calls(tmp_path: Path, stream: bool) -> None:
    """Past reports, refusals in Chinese, German and French, questions, a tag inside a sentence: content only."""
    with scripted_proxy(tmp_path, script=echo) as running:
        for text in PROSE:
            assert _ask(running.url, text, [DELETE], stream=stream) == {"content": text, "calls": [], "finish": "stop"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_fenced_tagged_and_listed_calls_still_come_back_as_tool_calls(tmp_path: Path, stream: bool) -> None:
    """A fenced call that is the whole answer, a tag after a sentence, [TOOL_CALLS] and a python list are calls."""
    with scripted_proxy(tmp_path, script=echo) as running:
        for text in DELIMITED:
            got = _ask(running.url, text, [DELETE], stream=stream)
            assert (got["calls"], got["finish"]) == ([("delete_file", {"path": "/tmp/x"})], "tool_calls"), text


def test_a_policy_declares_read_only_tools_whose_calls_may_stand_in_running_text(tmp_path: Path) -> None:
    """The same running-text call is content for an undeclared tool and a call once the policy declares it."""
    text = "Let me check: get_weather(city='Paris')"
    with scripted_proxy(tmp_path / "a", script=echo) as running:
        assert _ask(running.url, text, [WEATHER])["calls"] == []
    cache = ToolCache(policy=ToolPolicy.read_only("get_*", why="test"))
    with scripted_proxy(tmp_path / "b", script=echo, tool_cache=cache) as running:
        got = _ask(running.url, text, [WEATHER, DELETE])
        assert (got["calls"], got["finish"]) == ([("get_weather", {"city": "Paris"})], "tool_calls")
        assert _ask(running.url, PROSE[0], [WEATHER, DELETE])["calls"] == []


def test_proxy_help_shows_the_policy_and_a_bad_policy_stops_it(tmp_path: Path) -> None:
    """``proxy --help`` lists --policy; a malformed file exits 2 before serving, naming the rule."""
    from tooldispatch.cli import app

    runner = CliRunner()
    shown = runner.invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "--policy" in shown.stdout and "side-effecting" in shown.stdout
    bad = tmp_path / "policy.toml"
    bad.write_text('[tools."get_*"]\nread_only = 1\n', encoding="utf-8")
    result = runner.invoke(
        app, ["proxy", "--base-url", "http://127.0.0.1:9/v1", "--dialect", "llama-server", "--policy", str(bad)]
    )
    assert result.exit_code == 2
    assert '[tools."get_*"] read_only must be true or false, not 1' in result.output
