"""OpenAI Chat Completions request shapes through every mode of the proxy, streamed and not.

Modes: in process (a scripted backend in the in-process upstream's place), a llama-server upstream (client
parse: tools in the prompt), a vLLM upstream (server parse: tools passed on), and forwarding (no tools, to an
HTTP upstream, as sent). Each shape is either answered (a whole completion, or a stream that ends with a finish
reason and ``[DONE]`` and carries no error event) or refused with a 400 naming the field, never a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.proxy import Upstream

from .conftest import ASK, HERMES_CALL, WEATHER, Running, running_proxy, scripted_proxy
from .test_llama import _UNUSED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MODES = ("in-process", "llama-server", "vllm", "forward")
PARTS_CONVERSATION: list[dict[str, Any]] = [
    {"role": "developer", "content": [{"type": "text", "text": "Answer briefly."}]},
    {"role": "system", "content": [{"type": "text", "text": "You check weather."}]},
    {"role": "user", "content": [{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Paris?"}]},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "Checking."}],
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "sunny, 22 C"}]},
]
IMAGE = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
]


def _in_process_turn(request: ChatRequest) -> ScriptedTurn:
    """A call while the conversation has no tool result, then prose (as a model would)."""
    if request.tools and request.tool_choice != "none" and not any(m.get("role") == "tool" for m in request.messages):
        return ScriptedTurn(content=f"Let me check.\n{HERMES_CALL}", chunk=7)
    return ScriptedTurn(content="It is sunny in Paris.", chunk=5)


@dataclass
class Mode:
    """A running proxy in one mode and what its upstream received."""

    name: str
    running: Running
    backend: ScriptedBackend | None

    def received(self) -> list[Mapping[str, Any]]:
        """The messages the upstream got for the last request (as the backend or the server saw them)."""
        if self.backend is not None:
            return list(self.backend.requests[-1].messages)
        return list(self.running.upstream.requests[-1]["messages"])

    def body(self) -> Mapping[str, Any]:
        """The last HTTP body the upstream received (HTTP modes only)."""
        return self.running.upstream.requests[-1]


@contextmanager
def serve_mode(name: str, tmp_path: Path) -> Iterator[Mode]:
    """A proxy in mode ``name``."""
    if name == "in-process":
        backend = ScriptedBackend(_in_process_turn)
        upstream = Upstream(backend=backend, model="local", label="local", quant="q", mode="in-process")
        with running_proxy(upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
            yield Mode(name, running, backend)
        return
    dialect = "vllm" if name == "vllm" else "llama-server"
    with scripted_proxy(tmp_path, dialect=dialect) as running:
        yield Mode(name, running, None)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Mode]:
    """The proxy in each mode in turn."""
    with serve_mode(request.param, tmp_path) as served:
        yield served


def post(mode: Mode, body: Mapping[str, Any] | bytes, *, stream: bool) -> httpx2.Response:
    """POST a body (a mapping gets ``model``, ``tools`` unless forwarding, and ``stream``)."""
    if isinstance(body, bytes):
        content = body
    else:
        full = {"model": "m", **body, "stream": stream}
        if mode.name != "forward" and "tools" not in full:
            full["tools"] = [WEATHER]
        content = json.dumps(full).encode()
    return httpx2.post(
        f"{mode.running.url}/chat/completions",
        content=content,
        headers={"content-type": "application/json"},
        timeout=30,
    )


def answered(response: httpx2.Response, *, stream: bool) -> dict[str, Any]:
    """The answer, checked whole: for a stream, the content and calls put together and the finish reason."""
    assert response.status_code == 200, response.text
    if not stream:
        data: dict[str, Any] = response.json()
        assert data["choices"][0]["finish_reason"] in ("stop", "tool_calls", "length")
        return {"message": data["choices"][0]["message"], "finish_reason": data["choices"][0]["finish_reason"]}
    text = response.text
    assert text.endswith("data: [DONE]\n\n"), text[-200:]
    events = [json.loads(part[6:]) for part in text.split("\n\n") if part.startswith("data: {")]
    assert not [e for e in events if "error" in e], text[-400:]
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    reasons = [
        e["choices"][0]["finish_reason"] for e in events if e.get("choices") and e["choices"][0]["finish_reason"]
    ]
    assert len(reasons) == 1 and reasons[0] in ("stop", "tool_calls", "length")
    return {"message": {"content": content}, "finish_reason": reasons[0], "events": events}


def refused(response: httpx2.Response, param: str | None = None) -> str:
    """The message of a 400 in OpenAI's error shape (naming ``param`` when given)."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if param is not None:
        assert error["param"] == param
    return str(error["message"])


STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@STREAMS
def test_content_parts_in_every_role_and_developer_role_are_answered(mode: Mode, stream: bool) -> None:
    """Content as lists of text parts in every role, and a developer message, are answered; tool paths get text."""
    answered(post(mode, {"messages": PARTS_CONVERSATION}, stream=stream), stream=stream)
    messages = mode.received()
    if mode.name == "forward":
        assert messages == [{**m} for m in PARTS_CONVERSATION]  # forwarded as sent
        return
    assert all(m.get("content") is None or isinstance(m["content"], str) for m in messages)
    assert "developer" not in {m.get("role") for m in messages}
    assert any("Weather in\nParis?" in str(m.get("content")) for m in messages)
    assert any("sunny, 22 C" in str(m.get("content")) for m in messages)


@STREAMS
def test_image_part_to_a_text_model_is_a_400_that_says_so_or_forwarded(mode: Mode, stream: bool) -> None:
    """An image part is refused where the proxy renders or rebuilds the turn, and passed on when forwarding."""
    response = post(mode, {"messages": IMAGE}, stream=stream)
    if mode.name == "forward":
        answered(response, stream=stream)
        assert mode.received() == IMAGE
        return
    assert "image" in refused(response, "messages[0].content[1]")


@STREAMS
def test_sampling_fields_are_taken_and_passed_on(mode: Mode, stream: bool) -> None:
    """max_completion_tokens, stop, n=1, seed and temperature are answered; HTTP upstreams get them."""
    body = {"messages": ASK, "max_completion_tokens": 77, "stop": ["\n\n"], "n": 1, "seed": 3, "temperature": 0.5}
    answered(post(mode, body, stream=stream), stream=stream)
    if mode.backend is not None:
        sent = mode.backend.requests[-1]
        assert (sent.max_tokens, tuple(sent.stop), sent.seed, sent.temperature) == (77, ("\n\n",), 3, 0.5)
        return
    got = mode.body()
    key = "max_completion_tokens" if mode.name == "forward" else "max_tokens"
    assert (got[key], got["stop"], got["seed"], got["temperature"]) == (77, ["\n\n"], 3, 0.5)


@STREAMS
def test_n_above_one_is_refused(mode: Mode, stream: bool) -> None:
    """n > 1 is a 400 naming 'n' in every mode."""
    refused(post(mode, {"messages": ASK, "n": 2}, stream=stream), "n")


@STREAMS
@pytest.mark.parametrize("kind", ["json_object", "json_schema"])
def test_response_format_is_passed_on_or_refused_in_process(mode: Mode, stream: bool, kind: str) -> None:
    """response_format reaches HTTP upstreams as sent; in process (no JSON grammar there) it is a clear 400."""
    fmt: dict[str, Any] = {"type": kind}
    if kind == "json_schema":
        fmt["json_schema"] = {"name": "w", "schema": {"type": "object"}}
    response = post(mode, {"messages": ASK, "response_format": fmt}, stream=stream)
    if mode.name == "in-process":
        assert "response_format" in refused(response, "response_format")
        return
    answered(response, stream=stream)
    assert mode.body()["response_format"] == fmt


def test_include_usage_gives_the_usage_chunk(mode: Mode) -> None:
    """stream_options.include_usage ends the stream with a usage chunk (empty choices) before [DONE]."""
    body = {"messages": ASK, "stream_options": {"include_usage": True}}
    events = answered(post(mode, body, stream=True), stream=True)["events"]
    usage = [e for e in events if e.get("usage")]
    assert usage and usage[-1]["choices"] == [] and usage[-1]["usage"]["total_tokens"] > 0


@STREAMS
def test_logprobs_are_forwarded_or_refused_with_the_reason(mode: Mode, stream: bool) -> None:
    """logprobs go to the upstream when forwarding; where the answer is rebuilt, they are a 400 saying why."""
    response = post(mode, {"messages": ASK, "logprobs": True, "top_logprobs": 2}, stream=stream)
    if mode.name == "forward":
        answered(response, stream=stream)
        assert mode.body()["logprobs"] is True
        return
    refused(response, "logprobs")


@STREAMS
def test_unknown_fields_are_passed_on_or_ignored_never_a_500(mode: Mode, stream: bool) -> None:
    """A field the proxy does not know reaches HTTP upstreams as sent and does not fail the in-process model."""
    answered(post(mode, {"messages": ASK, "vendor_knob": {"x": [1, 2]}}, stream=stream), stream=stream)
    if mode.backend is None:
        assert mode.body()["vendor_knob"] == {"x": [1, 2]}


BAD: list[tuple[str, bytes, str | None]] = [
    (
        "stream as a string",
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"}',
        "stream",
    ),
    ("temperature NaN", b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', None),
    (
        "temperature 5",
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 5}',
        "temperature",
    ),
    ("max_tokens 0", b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}', "max_tokens"),
    ("stop of numbers", b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": [1]}', "stop"),
    ("lone surrogate", b'{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}', None),
    (
        "deep nesting",
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
        None,
    ),
    ("content a number", b'{"model": "m", "messages": [{"role": "user", "content": 5}]}', None),
]


@pytest.mark.parametrize(("raw", "param"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_bodies_are_400s_with_a_message(mode: Mode, raw: bytes, param: str | None) -> None:
    """Wrong types, NaN, a lone surrogate and 100,000 levels of nesting are 400s, never 500s, in every mode (with
    tools where the mode has them)."""
    if mode.name == "forward" and b'"content": 5' in raw:
        answered(post(mode, raw, stream=False), stream=False)  # forwarded as sent: the upstream judges content
        return
    if mode.name != "forward":
        raw = b'{"tools": ' + json.dumps([WEATHER]).encode() + b", " + raw[1:]
    refused(post(mode, raw, stream=False), param)


def test_deeply_nested_schema_in_tools_is_a_400(mode: Mode) -> None:
    """A tool schema nested 3,000 levels deep is refused with a 400, not a RecursionError's 500."""
    deep = '{"type": "object", "properties": {"x": ' * 3000 + '{"type": "object"}' + "}}" * 3000
    tool = '{"type": "function", "function": {"name": "deep", "parameters": ' + deep + "}}"
    messages = json.dumps(ASK)
    response = post(mode, f'{{"model": "m", "messages": {messages}, "tools": [{tool}]}}'.encode(), stream=False)
    assert response.status_code == 400, response.text[:300]
