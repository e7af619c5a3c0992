"""OpenAICompatBackend against servers that misbehave: bodies that are not chat completions, streams cut off
without their terminator, keep-alive comments that never end. A raw HTTP server on 127.0.0.1 writes each
answer byte for byte (these conditions cannot be recorded from a healthy server, so they are written here)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.base import ChatRequest, ContentDelta, Event
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.dispatch import Registry
from tooldispatch.errors import BackendUnavailable, ProviderError

from .conftest import untimed

ASK = ChatRequest(messages=[{"role": "user", "content": "hi"}])
Step = tuple[float, bytes]
"""Seconds to wait, then bytes to write."""


@dataclass
class RawServer:
    """Answers each request with the next queued list of steps, then closes the connection."""

    url: str
    queue: list[list[Step]] = field(default_factory=list)


def _head(content_type: str, *, length: int | None = None) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Type: {content_type}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def sse(body: str) -> list[Step]:
    """A close-delimited event stream with this body."""
    return [(0.0, _head("text/event-stream") + body.encode())]


def whole(content_type: str, body: str) -> list[Step]:
    """A complete response with a Content-Length."""
    data = body.encode()
    return [(0.0, _head(content_type, length=len(data)) + data)]


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        rest += chunk


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    """A loopback server that writes scripted bytes; stopped after the test."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)
    state = RawServer(url=f"http://127.0.0.1:{listener.getsockname()[1]}/v1")
    stop = threading.Event()

    def answer(conn: socket.socket, steps: list[Step]) -> None:
        try:
            _read_request(conn)
            for delay, data in steps:
                if stop.wait(delay):
                    return
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            steps = state.queue.pop(0) if state.queue else whole("text/plain", "nothing queued")
            threading.Thread(target=answer, args=(conn, steps), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join()
        listener.close()


def _backend(
    server: RawServer, *, timeout_s: float = 600.0, idle_timeout_s: float | None = None
) -> OpenAICompatBackend:
    return OpenAICompatBackend(
        base_url=server.url, model="m", dialect="llama-server", timeout_s=timeout_s, idle_timeout_s=idle_timeout_s
    )


async def _drain(backend: OpenAICompatBackend, *, stream: bool = True) -> list[Event]:
    events = backend.stream(ASK) if stream else backend.complete(ASK)
    return [e async for e in events]


CHUNK = '{"choices":[{"index":0,"delta":{"content":"partial answer "}}]}'


@pytest.mark.parametrize(
    ("body", "arrived"),
    [
        ("data: {not json}\n\n", "'{not json}'"),
        ("data: [1,2,3]\n\n", "'[1, 2, 3]'"),
        ('data: "str"\n\n', "'str'"),
    ],
    ids=["not-json", "json-list", "json-string"],
)
async def test_fault9_stream_event_that_is_not_a_chunk_is_a_provider_error(
    raw_server: RawServer, body: str, arrived: str
) -> None:
    """Fault 9: a stream event that is not a JSON object is a ProviderError quoting what arrived."""
    raw_server.queue.append(sse(f"data: {CHUNK}\n\n{body}data: [DONE]\n\n"))
    seen: list[Event] = []
    with pytest.raises(ProviderError) as info:
        async for event in _backend(raw_server).stream(ASK):
            seen.append(event)
    assert untimed(seen) == untimed([ContentDelta("partial answer ")])
    assert str(info.value) == (
        f"the llama-server endpoint at {raw_server.url} sent a stream event that is not a chat completion "
        f"chunk: {arrived}"
    )


@pytest.mark.parametrize(
    ("content_type", "body", "arrived"),
    [
        ("text/html", "<html><body>Bad gateway</body></html>", "'<html><body>Bad gateway</body></html>'"),
        ("application/json", "[1, 2]", "'[1, 2]'"),
        ("application/json", '"ok"', "'ok'"),
    ],
    ids=["html", "json-list", "json-string"],
)
async def test_fault9_response_that_is_not_a_completion_is_a_provider_error(
    raw_server: RawServer, content_type: str, body: str, arrived: str
) -> None:
    """Fault 9: a 200 whose body is HTML or JSON that is not an object is a ProviderError quoting it."""
    raw_server.queue.append(whole(content_type, body))
    with pytest.raises(ProviderError) as info:
        await _drain(_backend(raw_server), stream=False)
    assert str(info.value) == (
        f"the llama-server endpoint at {raw_server.url} answered with something that is not a chat completion: "
        f"{arrived}"
    )


async def test_fault9_streamed_request_answered_with_html_is_a_provider_error(raw_server: RawServer) -> None:
    """Fault 9: a streamed request answered 200 with an HTML page (not an event stream) is a ProviderError
    quoting the page."""
    raw_server.queue.append(whole("text/html", "<html><body>Bad gateway</body></html>"))
    with pytest.raises(ProviderError) as info:
        await _drain(_backend(raw_server))
    assert str(info.value) == (
        f"the llama-server endpoint at {raw_server.url} answered a streamed request with text/html instead of "
        "an event stream: '<html><body>Bad gateway</body></html>'"
    )


async def test_fault9_agent_returns_a_record_when_the_stream_is_garbage(raw_server: RawServer) -> None:
    """Fault 9: Agent.arun ends as backend_error with the message, instead of raising."""
    raw_server.queue.append(sse("data: [1,2,3]\n\ndata: [DONE]\n\n"))
    agent = Agent(backend=_backend(raw_server), registry=Registry())
    run = await agent.arun("hi")
    assert (run.end, run.final_answer) == ("backend_error", None)
    assert run.error == (
        f"the llama-server endpoint at {raw_server.url} sent a stream event that is not a chat completion chunk: "
        "'[1, 2, 3]'"
    )


async def test_fault10_stream_cut_without_terminator_is_an_error(raw_server: RawServer) -> None:
    """Fault 10: a close-delimited stream that ends mid-JSON, without a finish reason or [DONE], is
    BackendUnavailable after the content that did arrive, never a complete turn."""
    raw_server.queue.append(sse(f'data: {CHUNK}\n\ndata: {{"choices":[{{"index":0,"delta":{{"content":"and mo'))
    seen: list[Event] = []
    with pytest.raises(BackendUnavailable) as info:
        async for event in _backend(raw_server).stream(ASK):
            seen.append(event)
    assert untimed(seen) == untimed([ContentDelta("partial answer ")])
    assert str(info.value) == (
        f"the stream from the llama-server endpoint at {raw_server.url} ended without its terminator "
        "(no finish reason, no [DONE]): the answer was cut off; the server may have crashed or restarted"
    )


def _keepalive_forever(seconds: float) -> list[Step]:
    steps: list[Step] = [(0.0, _head("text/event-stream") + f"data: {CHUNK}\n\n".encode())]
    steps += [(0.25, b": keep-alive\n\n")] * int(seconds / 0.25)
    return steps


async def test_fault10_keepalive_comments_do_not_defeat_the_gap_timeout(raw_server: RawServer) -> None:
    """Fault 10: comment lines every 0.25 s for 8 s do not keep a stream alive past a 0.5 s gap between events."""
    raw_server.queue.append(_keepalive_forever(8.0))
    with pytest.raises(BackendUnavailable) as info:
        await _drain(_backend(raw_server, timeout_s=30.0, idle_timeout_s=0.5))
    assert str(info.value) == (
        f"the llama-server endpoint at {raw_server.url} sent no stream event for 0.5 s; "
        "check that it is running and not overloaded, or raise idle_timeout_s"
    )


async def test_fault10_timeout_bounds_the_whole_stream(raw_server: RawServer) -> None:
    """Fault 10: a stream that keeps sending content every 0.25 s is cut at timeout_s for the whole request."""
    steps: list[Step] = [(0.0, _head("text/event-stream"))]
    steps += [(0.25, f"data: {CHUNK}\n\n".encode())] * 32
    raw_server.queue.append(steps)
    with pytest.raises(BackendUnavailable) as info:
        await _drain(_backend(raw_server, timeout_s=1.0))
    assert str(info.value) == (
        f"the llama-server endpoint at {raw_server.url} did not finish its answer within 1 s; "
        "check that it is running and not overloaded, or raise the timeout"
    )


async def test_fault10_wall_budget_bounds_a_model_turn(raw_server: RawServer) -> None:
    """Fault 10: Budget(max_wall_s=1) ends a run whose stream never ends as wall_time, with no answer."""
    raw_server.queue.append(_keepalive_forever(8.0))
    agent = Agent(backend=_backend(raw_server, timeout_s=30.0), registry=Registry(), budget=Budget(max_wall_s=1.0))
    started = time.monotonic()
    run = await agent.arun("hi")
    assert (run.end, run.final_answer, len(run.turns)) == ("wall_time", None, 0)
    assert time.monotonic() - started < 8.0
