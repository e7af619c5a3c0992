"""Honest endings: a reply cut by the token cap says ``length``, a broken stream is an error, and ``--timeout``
bounds the whole answer (non-streamed) and each gap of a stream."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.proxy import build_upstream
from tooldispatch.proxy.scripted import Canned

from .conftest import ASK, HERMES_CALL, WEATHER, running_proxy, scripted_proxy
from .test_llama import _UNUSED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CUT = HERMES_CALL + '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ly'


def _post(url: str, body: dict[str, Any], timeout: float = 20) -> httpx2.Response:
    return httpx2.post(f"{url}/chat/completions", json={"model": "m", **body}, timeout=timeout)


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(part[6:]) for part in text.split("\n\n") if part.startswith("data: {")]


def _finishes(events: list[dict[str, Any]]) -> list[str]:
    return [e["choices"][0]["finish_reason"] for e in events if e.get("choices") and e["choices"][0]["finish_reason"]]


@pytest.mark.parametrize("dialect", ["llama-server", "vllm"])
def test_cut_reply_is_length_with_the_complete_calls_kept(tmp_path: Path, dialect: str) -> None:
    """A reply the cap cut after one whole call answers that call with finish_reason length, streamed and not."""
    with scripted_proxy(
        tmp_path, script=lambda body: ScriptedTurn(content=CUT, finish_reason="length", chunk=9), dialect=dialect
    ) as running:
        whole = _post(running.url, {"messages": ASK, "tools": [WEATHER]}).json()["choices"][0]
        assert whole["finish_reason"] == "length"
        assert [json.loads(c["function"]["arguments"]) for c in whole["message"]["tool_calls"]] == [
            {"city": "Paris", "unit": "celsius"}
        ]
        events = _events(_post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": True}).text)
        assert _finishes(events) == ["length"]
        calls = [c for e in events if e.get("choices") for c in e["choices"][0]["delta"].get("tool_calls", [])]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris", "unit": "celsius"}]
        rows = running.counted(2)
        assert [(r[0], r[3]) for r in rows] == [(200, 1), (200, 1)]
        truncated = running.store.fetchall("SELECT truncated, finish_reason FROM proxy_requests")
        assert truncated == [(1, "length"), (1, "length")]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "scripted"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(body).encode() + b"\n\n"


@pytest.mark.parametrize("tools", [True, False], ids=["with tools", "forwarded"])
def test_stream_without_terminator_is_an_error_event_not_a_stop(tmp_path: Path, tools: bool) -> None:
    """A stream that ends with neither finish reason nor [DONE] ends in an upstream_dropped error event."""
    cut = _chunk({"role": "assistant", "content": "Let me "}) + _chunk({"content": "chec"})
    with scripted_proxy(tmp_path) as running:
        running.upstream.canned.append(Canned(200, cut, content_type="text/event-stream"))
        body: dict[str, Any] = {"messages": ASK, "stream": True}
        if tools:
            body["tools"] = [WEATHER]
        text = _post(running.url, body).text
        events = _events(text)
        assert [e["error"]["code"] for e in events if "error" in e] == ["upstream_dropped"]
        assert "stop" not in _finishes(events)
        assert text.endswith("data: [DONE]\n\n")


def test_streamed_request_answered_with_an_html_page_is_a_502(tmp_path: Path) -> None:
    """A 200 text/html answer to a streamed request is an upstream error quoting the page, never an empty stop."""
    with scripted_proxy(tmp_path) as running:
        running.upstream.canned.append(Canned(200, b"<html>maintenance</html>", content_type="text/html"))
        response = _post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": True})
        assert response.status_code == 502
        assert "maintenance" in response.json()["error"]["message"]


@contextmanager
def trickling_upstream(body: bytes, gap_s: float) -> Iterator[str]:
    """An HTTP server answering any request with ``body``, one byte every ``gap_s`` seconds; yields its /v1 URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                )
                for i in range(len(body)):
                    if stop.is_set():
                        return
                    try:
                        conn.sendall(body[i : i + 1])
                    except OSError:
                        break
                    time.sleep(gap_s)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_timeout_bounds_the_whole_answer_not_each_read(tmp_path: Path) -> None:
    """An upstream trickling its answer a byte every 0.1 s is cut at --timeout (1 s) with a 504."""
    answer = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "t",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hello " * 20}, "finish_reason": "stop"}
            ],
        }
    ).encode()
    with trickling_upstream(answer, 0.1) as url:
        upstream = build_upstream(base_url=url, dialect="llama-server", served_model="t", timeout_s=1.0)
        with running_proxy(upstream, tmp_path / "state.db", scripted=_UNUSED) as running:
            started = time.monotonic()
            response = _post(running.url, {"messages": ASK, "tools": [WEATHER]})
            assert response.status_code == 504 and response.json()["error"]["code"] == "upstream_timeout"
            assert time.monotonic() - started < 5


def test_stream_gap_bound_lets_a_slow_but_steady_stream_finish(tmp_path: Path) -> None:
    """With --timeout 1 s, a stream whose chunks come 0.3 s apart for longer than 1 s in all is answered whole."""
    with scripted_proxy(
        tmp_path, script=lambda body: ScriptedTurn(content="One two three four five six.", chunk=4), timeout_s=1.0
    ) as running:
        running.upstream.delay_s = 0.3
        events = _events(_post(running.url, {"messages": ASK, "tools": [WEATHER], "stream": True}).text)
        assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")) == (
            "One two three four five six."
        )
        assert _finishes(events) == ["stop"]
