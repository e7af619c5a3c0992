"""Requests recorded from real agent clients (Qwen Code, opencode) replayed through every mode of the proxy.

``tests/fixtures/clients/*.json`` hold the bodies those clients sent to ``tooldispatch proxy --record`` with the
packaged model behind it (``extract.py`` there says how they were made). Each body is sent again as it was, and
with ``stream`` turned the other way, to a proxy whose scripted model answers with the call the fixture names
(the client's own file-reading tool, in Qwen's ``<tool_call>`` form) when the recorded conversation has no tool
result, and with a sentence when it has one. The proxy must take the client's real request (content parts,
``stream_options``, its tool schemas) and give back that call, checked against the client's own schema, or the
sentence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.proxy import Upstream

from .conftest import Running, running_proxy, scripted_proxy
from .test_conformance import answered
from .test_llama import _UNUSED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

FIXTURES = Path(__file__).parents[2] / "fixtures" / "clients"
SENTENCE = "The release is owned by Dana."
OPENCODE_TEMP = "/tmp/opencode"  # named in opencode's own system prompt
CASES = [
    pytest.param(path, index, id=f"{path.stem}-{index}")
    for path in sorted(FIXTURES.glob("*.json"))
    for index in range(len(json.loads(path.read_text(encoding="utf-8"))["exchanges"]))
]


def _turn(call: Mapping[str, Any], has_result: bool) -> ScriptedTurn:
    """The sentence when the conversation holds a tool result, else the fixture's call in Qwen's tags."""
    if has_result:
        return ScriptedTurn(content=SENTENCE, chunk=6)
    return ScriptedTurn(content=f"<tool_call>\n{json.dumps(call)}\n</tool_call>", chunk=6)


@contextmanager
def _proxy(mode: str, turn: ScriptedTurn, tmp_path: Path) -> Iterator[Running]:
    if mode == "in-process":
        backend = ScriptedBackend(lambda request: turn)
        upstream = Upstream(backend=backend, model="local", label="local", quant="q", mode="in-process")
        with running_proxy(upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
            yield running
        return
    dialect = "vllm" if mode == "vllm" else "llama-server"

    with scripted_proxy(tmp_path, script=lambda body: turn, dialect=dialect) as running:
        yield running


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("mode", ["in-process", "llama-server", "vllm"])
@pytest.mark.parametrize(("path", "index"), CASES)
def test_a_recorded_client_request_gets_the_call_or_the_answer(
    path: Path, index: int, mode: str, stream: bool, tmp_path: Path
) -> None:
    """The recorded body is answered 200 with the scripted call on the client's tool (or the sentence)."""
    fixture = json.loads(path.read_text(encoding="utf-8"))
    call = fixture["replay_call"]
    body = {**fixture["exchanges"][index]["request"], "stream": stream}
    declared = {t["function"]["name"] for t in body["tools"]}
    assert call["name"] in declared
    has_result = any(m.get("role") == "tool" for m in body["messages"])
    with _proxy(mode, _turn(call, has_result), tmp_path) as running:
        response = httpx2.post(
            f"{running.url}/chat/completions",
            content=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
            timeout=60,
        )
    answer = answered(response, stream=stream)
    if has_result:
        assert (answer["finish_reason"], answer["message"]["content"]) == ("stop", SENTENCE)
        return
    assert answer["finish_reason"] == "tool_calls"
    calls = _calls(answer, stream=stream)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [(call["name"], call["arguments"])]
    if stream and body.get("stream_options", {}).get("include_usage"):
        assert answer["events"][-1]["usage"]["completion_tokens"] > 0


def _calls(answer: Mapping[str, Any], *, stream: bool) -> list[dict[str, str]]:
    """The answer's tool calls as name and arguments, put together from the deltas when streamed."""
    if not stream:
        return [c["function"] for c in answer["message"].get("tool_calls") or []]
    calls: dict[int, dict[str, str]] = {}
    for event in answer["events"]:
        for choice in event.get("choices") or []:
            for delta in choice["delta"].get("tool_calls") or []:
                slot = calls.setdefault(delta["index"], {"name": "", "arguments": ""})
                slot["name"] += delta["function"].get("name") or ""
                slot["arguments"] += delta["function"].get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


def test_every_fixture_is_scrubbed_and_says_where_it_came_from() -> None:
    """Each fixture names its client and command, and keeps no folder of the machine it was recorded on."""
    paths = sorted(FIXTURES.glob("*.json"))
    assert paths
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fixture = json.loads(text)
        assert fixture["source"].startswith("recorded: ") and fixture["client"] and fixture["command"]
        paths = set(re.findall(r"/(?:tmp|root|home)/[^\s\"'`<>)\\]*", text))
        assert paths and all(p.startswith("/home/user") or p == OPENCODE_TEMP for p in paths), paths
