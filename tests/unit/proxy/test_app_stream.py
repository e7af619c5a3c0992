"""What the proxy's chat route reads and writes, seen at the ASGI boundary (no server, a scripted backend)."""

from __future__ import annotations

import json
from typing import Any

from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.proxy import Limits, Proxy, Recorder, Upstream, build_app
from tooldispatch.store import Store

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


async def _call(
    app: Any, body: dict[str, Any], send: Any = None, *, headers: list[tuple[bytes, bytes]] | None = None
) -> list[dict[str, Any]]:
    """Run one request through the ASGI app (its body in two parts, ``headers`` added to the content type and
    length); every message it sends, in order (or each given to ``send``)."""
    data = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
            *(headers or []),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    received = [
        {"type": "http.request", "body": data[:10], "more_body": True},
        {"type": "http.request", "body": data[10:], "more_body": False},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if received:
            return received.pop(0)
        import anyio

        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def record(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send or record)
    return sent


def _events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(part[6:]) for part in body.decode().split("\n\n") if part.startswith("data: {")]


async def test_opening_and_first_event_go_out_in_the_first_write() -> None:
    """The role chunk and what the upstream's first event completes are one body message, right after the head."""
    backend = ScriptedBackend([ScriptedTurn(reasoning="Think.", content="Hello there.", chunk=6)])
    upstream = Upstream(backend=backend, model="s", label="s", quant="q", mode="in-process")
    sent = await _call(
        build_app(Proxy(upstream, Limits())),
        {"model": "s", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "stream": True},
    )
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    first = _events(sent[1]["body"])
    assert [e["choices"][0]["delta"] for e in first] == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "Think.", "reasoning": "Think."},
    ]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    whole = b"".join(m.get("body", b"") for m in sent[1:])
    assert whole.endswith(b"data: [DONE]\n\n")
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in _events(whole) if e.get("choices"))
    assert content == "Hello there."


async def test_each_later_event_is_one_write() -> None:
    """After the first write, each body message holds exactly the chunks of one upstream event."""
    backend = ScriptedBackend([ScriptedTurn(content="abcdefghi", chunk=3)])
    upstream = Upstream(backend=backend, model="s", label="s", quant="q", mode="in-process")
    sent = await _call(
        build_app(Proxy(upstream, Limits())),
        {"model": "s", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "stream": True},
    )
    bodies = [m["body"] for m in sent[1:-1]]
    deltas = [[e["choices"][0]["delta"] for e in _events(b) if e.get("choices")] for b in bodies]
    assert deltas[0] == [{"role": "assistant", "content": ""}, {"content": "abc"}]
    assert deltas[1:3] == [[{"content": "def"}], [{"content": "ghi"}]]


async def test_client_gone_before_the_first_write_still_closes_the_upstream_stream() -> None:
    """When writing the first chunks fails (the client went away), the upstream turn is closed all the same."""
    closed: list[bool] = []

    class Tracked(ScriptedBackend):
        async def stream(self, request: Any) -> Any:
            try:
                async for event in super().stream(request):
                    yield event
            finally:
                closed.append(True)

    backend = Tracked([ScriptedTurn(content="abcdefghi", chunk=3)])
    upstream = Upstream(backend=backend, model="s", label="s", quant="q", mode="in-process")
    app = build_app(Proxy(upstream, Limits()))
    body = {"model": "s", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "stream": True}
    sent: list[dict[str, Any]] = []

    async def failing(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            raise OSError("the client went away")
        sent.append(message)

    await _call(app, body, send=failing)
    assert [m["type"] for m in sent] == ["http.response.start"]
    assert closed == [True]


async def test_non_streamed_answer_from_a_body_in_parts_and_a_bearer_key() -> None:
    """A body that arrives in parts is read whole; the key is read from the Authorization header."""
    backend = ScriptedBackend([ScriptedTurn(content='<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>')])
    upstream = Upstream(backend=backend, model="s", label="s", quant="q", mode="in-process")
    body = {"model": "s", "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER]}
    sent = await _call(
        build_app(Proxy(upstream, Limits(), api_key="k-1")), body, headers=[(b"authorization", b"Bearer k-1")]
    )
    assert sent[0]["status"] == 200
    answer = json.loads(sent[1]["body"])
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    refused = await _call(
        build_app(Proxy(upstream, Limits(), api_key="k-1")), body, headers=[(b"authorization", b"Bearer k-2")]
    )
    assert refused[0]["status"] == 401


async def test_client_gone_before_its_body_is_counted_as_disconnected(tmp_path: Any) -> None:
    """A client that goes away before its body arrives is counted as 499 client_disconnected, not a failure."""
    store = Store(tmp_path / "s.db")
    recorder = Recorder(store)
    upstream = Upstream(backend=ScriptedBackend([]), model="s", label="s", quant="q", mode="in-process")
    app = build_app(Proxy(upstream, Limits(), recorder=recorder))
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": [], "query_string": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    await app(scope, receive, send)
    recorder.flush()
    assert store.fetchone("SELECT status, error FROM proxy_requests") == (499, "client_disconnected")
    store.close()
