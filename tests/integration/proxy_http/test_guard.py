"""The repeat guard and rejected text: a turn that only repeats answered calls is answered without calls, and a
rejected call candidate's text still reaches the client; streamed and whole answers agree."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.policy import ToolPolicy, ToolRule
from tooldispatch.proxy.translate import ToolCache

from .conftest import ASK, WEATHER, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ANSWERED: list[dict[str, Any]] = [
    *ASK,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 22 C"},
]


def repeating(body: Mapping[str, Any]) -> ScriptedTurn:
    """Repeats the call while its tools are offered; answers from the result when they are not."""
    system = str(body["messages"][0].get("content")) if body["messages"] else ""
    if "get_weather" in system and "<tools>" in system:
        return ScriptedTurn(content=PARIS, chunk=6)
    return ScriptedTurn(content="The weather in Paris is sunny, 22 C.", chunk=6)


def _post(url: str, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(f"{url}/chat/completions", json={"model": "m", **body}, timeout=20)


def _streamed(text: str) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    events = [json.loads(part[6:]) for part in text.split("\n\n") if part.startswith("data: {")]
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    calls = [c for e in events if e.get("choices") for c in e["choices"][0]["delta"].get("tool_calls", [])]
    return content, calls, events


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_repeat_of_an_answered_call_is_answered_from_the_result(tmp_path: Path, stream: bool) -> None:
    """With the guard on (the default), a repeat of get_weather(Paris) after its result is answered as text."""
    with scripted_proxy(tmp_path, script=repeating) as running:  # on by default
        response = _post(running.url, {"messages": ANSWERED, "tools": [WEATHER], "stream": stream})
        if stream:
            content, calls, events = _streamed(response.text)
            assert calls == []
            assert [e["tooldispatch"] for e in events if "tooldispatch" in e] == [
                {"repeat_guard": {"repeated": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}}
            ]
            finish = [e["choices"][0]["finish_reason"] for e in events if e.get("choices")][-1]
        else:
            choice = response.json()["choices"][0]
            content, finish = choice["message"]["content"], choice["finish_reason"]
            assert "tool_calls" not in choice["message"]
            assert response.headers["x-tooldispatch-repeat-guard"] == "get_weather"
        assert content == "The weather in Paris is sunny, 22 C."
        assert finish == "stop"
        retry = running.upstream.requests[-1]
        assert "<tools>" not in str(retry["messages"][0].get("content"))
        running.counted(1)
        assert running.store.fetchall("SELECT flags, calls FROM proxy_requests") == [("repeat_guard", 0)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_guard_off_or_a_new_call_passes_the_calls_on(tmp_path: Path, stream: bool) -> None:
    """Without the guard the repeat goes out; with it, a call with other arguments goes out too."""
    with scripted_proxy(tmp_path, script=repeating, repeat_guard=False) as running:
        response = _post(running.url, {"messages": ANSWERED, "tools": [WEATHER], "stream": stream})
        calls = _streamed(response.text)[1] if stream else response.json()["choices"][0]["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
    other = [*ANSWERED[:-2], {**ANSWERED[-2], "tool_calls": [{**ANSWERED[-2]["tool_calls"][0], "function": {
        "name": "get_weather", "arguments": '{"city": "Lyon"}'}}]}, ANSWERED[-1]]  # fmt: skip
    with scripted_proxy(tmp_path, script=repeating, repeat_guard=True) as running:
        response = _post(running.url, {"messages": other, "tools": [WEATHER], "stream": stream})
        calls = _streamed(response.text)[1] if stream else response.json()["choices"][0]["message"]["tool_calls"]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_required_call_is_never_held(tmp_path: Path, stream: bool) -> None:
    """tool_choice required asks for a call every turn (smolagents sends it): the repeat goes out, unmarked."""
    with scripted_proxy(tmp_path, script=repeating) as running:
        body = {"messages": ANSWERED, "tools": [WEATHER], "tool_choice": "required", "stream": stream}
        response = _post(running.url, body)
        calls = _streamed(response.text)[1] if stream else response.json()["choices"][0]["message"]["tool_calls"]
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
        running.counted(1)
        assert running.store.fetchall("SELECT flags FROM proxy_requests") == [("",)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_polling_tool_of_the_policy_is_never_held(tmp_path: Path, stream: bool) -> None:
    """A tool the policy declares polling (its result may change) is called again even with the guard on."""
    policy = ToolPolicy((ToolRule("get_*", read_only=True, idempotent=True, polling=True),), source="test")
    with scripted_proxy(tmp_path, script=repeating, repeat_guard=True, tool_cache=ToolCache(policy=policy)) as running:
        response = _post(running.url, {"messages": ANSWERED, "tools": [WEATHER], "stream": stream})
        calls = _streamed(response.text)[1] if stream else response.json()["choices"][0]["message"]["tool_calls"]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            ("get_weather", {"city": "Paris"})
        ]
        running.counted(1)
        assert running.store.fetchall("SELECT flags FROM proxy_requests") == [("",)]


DOUBLED = '{{"name": "get_weather", "arguments": {"city": "Paris"}}}'
BROKEN = '<tool_call>{"name": "get_weather", "arguments": {"city" "Paris"}}</tool_call>'


@pytest.mark.parametrize(
    ("output", "rejected"),
    [
        (BROKEN, 1),
        (f"Here you go: {DOUBLED}", 0),
        ('<tool_call>{"name": "launch", "arguments": {}}</tool_call>', 1),
    ],
    ids=["a malformed tagged call (a rejected candidate)", "doubled braces after prose (prose)", "unknown tool"],
)
def test_rejected_candidate_text_reaches_the_client_alike_streamed_and_not(
    tmp_path: Path, output: str, rejected: int
) -> None:
    """When no call goes out, the model's text (a rejected candidate's too) is the content, streamed and not."""
    with scripted_proxy(tmp_path, script=lambda body: ScriptedTurn(content=output, chunk=5)) as running:
        whole = _post(running.url, {"messages": ASK, "tools": [WEATHER]}).json()["choices"][0]["message"]["content"]
        streamed = _streamed(_post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": True}).text)[0]
        assert whole == streamed == output
        running.counted(2)
        counted = running.store.fetchall("SELECT invalid_json + unknown_name, calls FROM proxy_requests")
        assert counted == [(rejected, 0), (rejected, 0)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_in_doubled_braces_alone_is_a_call(tmp_path: Path, stream: bool) -> None:
    """A whole output of one call in doubled braces is read as that call (the named ``doubled_braces`` repair)."""
    with scripted_proxy(tmp_path, script=lambda body: ScriptedTurn(content=DOUBLED, chunk=5)) as running:
        response = _post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": stream})
        calls = _streamed(response.text)[1] if stream else response.json()["choices"][0]["message"]["tool_calls"]
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            ("get_weather", {"city": "Paris"})
        ]


def test_unknown_name_calls_are_counted_in_the_statistics(tmp_path: Path) -> None:
    """A call of a tool the request does not declare is counted as UnknownName, streamed and not."""
    launch = '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'
    with scripted_proxy(tmp_path, script=lambda body: ScriptedTurn(content=launch, chunk=5)) as running:
        for stream in (False, True):
            _post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": stream})
        running.counted(2)
        assert running.store.fetchall("SELECT unknown_name FROM proxy_requests") == [(1,), (1,)]


def test_access_log_has_one_line_per_request_without_bodies(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each request logs one line with status, model, tokens, calls and buckets, and never the body's text."""
    with caplog.at_level(logging.INFO, logger="tooldispatch.proxy.access"), scripted_proxy(tmp_path) as running:
        _post(running.url, {"messages": ASK, "tools": [WEATHER]})
        _post(running.url, {"messages": ASK, "n": 3})
        running.counted(2)
    lines = [r.getMessage() for r in caplog.records if r.name == "tooldispatch.proxy.access"]
    assert len(lines) == 2
    assert lines[0].startswith("POST /v1/chat/completions 200 model=scripted mode=client stream=no tokens=10+5 calls=1")
    assert "buckets=repaired:1" in lines[0]
    assert lines[1].startswith("POST /v1/chat/completions 400 ") and "error=invalid_request" in lines[1]
    assert not any("Paris" in line for line in lines)
