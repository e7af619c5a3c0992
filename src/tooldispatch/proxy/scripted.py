"""A scripted OpenAI-compatible server: the upstream of the proxy's benchmark and tests.

It answers ``POST /v1/chat/completions`` from a script (a function from the request body to a
``ScriptedTurn``), without streaming or as SSE chunks shaped as vLLM sends them (reasoning in ``reasoning``,
calls as ``tool_calls`` deltas), and lists one model at ``GET /v1/models``. A turn's ``reasoning_s`` is spent
between the reasoning and the content, and ``delay_s`` between chunks, so timings and cancellation can be
observed; ``cancelled`` counts the streams whose client went away before the end.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tooldispatch.backends.scripted import ScriptedTurn

Script = Callable[[Mapping[str, Any]], ScriptedTurn]


@dataclass(frozen=True, slots=True)
class Canned:
    """A prepared HTTP answer, sent as is (a recorded wire payload, an error, a broken stream).

    Attributes:
        status: the HTTP status.
        body: the body, byte for byte.
        content_type: its media type.
        headers: extra headers (``Retry-After``).
    """

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class ScriptedServer:
    """The state of a scripted upstream.

    Attributes:
        script: the turn to answer for a request body.
        model: the model name it serves.
        delay_s: seconds between streamed chunks.
        requests: the bodies received, in order.
        cancelled: streams whose client disconnected before the end.
        canned: prepared answers, each sent once (before the script is asked) in order.
        headers: the request headers received, in order (lower-case names).
    """

    script: Script
    model: str = "scripted"
    delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    cancelled: int = 0
    keep_requests: bool = True
    canned: list[Canned] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def _chunks(self, turn: ScriptedTurn) -> list[dict[str, Any]]:
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        step = max(1, turn.chunk)
        for i in range(0, len(turn.reasoning), step):
            deltas.append({"reasoning": turn.reasoning[i : i + step]})
        for i in range(0, len(turn.content), step):
            deltas.append({"content": turn.content[i : i + step]})
        for index, call in enumerate(turn.tool_calls):
            args = call.get("arguments", {})
            text = args if isinstance(args, str) else json.dumps(args)
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_up{index}",
                            "type": "function",
                            "function": {"name": call["name"], "arguments": ""},
                        }
                    ]
                }
            )
            half = len(text) // 2
            for part in (text[:half], text[half:]):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
        return deltas

    def _message(self, turn: ScriptedTurn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.reasoning:
            message["reasoning"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_up{i}",
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": c["arguments"]
                        if isinstance(c.get("arguments"), str)
                        else json.dumps(c.get("arguments", {})),
                    },
                }
                for i, c in enumerate(turn.tool_calls)
            ]
        return message

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``."""
        body = json.loads(await request.body())
        if self.keep_requests:
            self.requests.append(body)
        if self.canned:
            canned = self.canned.pop(0)
            return Response(canned.body, canned.status, headers=dict(canned.headers), media_type=canned.content_type)
        turn = self.script(body)
        if self.keep_requests:
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
        head = {"id": "chatcmpl-scripted", "created": int(time.time()), "model": self.model}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            if turn.reasoning_s:
                await asyncio.sleep(turn.reasoning_s)
            answer = {
                **head,
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": self._message(turn), "finish_reason": turn.finish_reason, "logprobs": None}
                ],
                "usage": usage,
            }
            return Response(json.dumps(answer), media_type="application/json")
        deltas = self._chunks(turn)
        first_content = next((i for i, d in enumerate(deltas) if d.get("content")), len(deltas))

        async def stream() -> AsyncIterator[bytes]:
            done = False
            try:
                for i, delta in enumerate(deltas):
                    if i == first_content and turn.reasoning_s:
                        await asyncio.sleep(turn.reasoning_s)
                    elif self.delay_s and i:
                        await asyncio.sleep(self.delay_s)
                    chunk = {
                        **head,
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    }
                    yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
                end = {
                    **head,
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {}, "finish_reason": turn.finish_reason}],
                }
                yield b"data: " + json.dumps(end).encode() + b"\n\n"
                tail = {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}
                yield b"data: " + json.dumps(tail).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"
                done = True
            finally:
                if not done:
                    self.cancelled += 1

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``."""
        return Response(
            json.dumps({"object": "list", "data": [{"id": self.model, "object": "model"}]}),
            media_type="application/json",
        )

    def app(self) -> Starlette:
        """The ASGI application."""
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )


@dataclass(frozen=True, slots=True)
class Running:
    """A server running on a thread of its own.

    Attributes:
        url: its root URL (``http://127.0.0.1:PORT``).
    """

    url: str


@contextmanager
def serve_in_thread(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning", http: Any = "auto"
) -> Iterator[Running]:
    """Run an ASGI app with uvicorn on a thread of its own; stop it when the block ends.

    Port 0 picks a free port (the one bound is in the yielded URL); ``http`` is uvicorn's protocol (a class, such
    as ``server.with_head_timeout``'s).
    """
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level=log_level, lifespan="on", access_log=False, timeout_graceful_shutdown=2, http=http
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="tooldispatch-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server on {host}:{bound} did not start")
        time.sleep(0.01)
    try:
        yield Running(url=f"http://{host}:{bound}")
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
