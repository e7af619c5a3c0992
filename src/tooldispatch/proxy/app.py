"""The ASGI application: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``.

Each route checks the key (when one is set), bounds the body, and answers either the upstream's work or one
OpenAI-shaped error. Requests without tools go to an HTTP upstream as they came; requests with tools go
through the backend and the parser (``turn`` without streaming, ``stream`` with it). Every request, failed
ones too, is counted by the ``Recorder``.

Starlette routes the requests and runs the lifespan. The chat route is a plain ASGI endpoint (``ChatRoute``):
it reads the body from ``receive`` and its answer is an ASGI callable, without Starlette's request object and
the wrappers around a request handler (what they cost per request: ``docs/benchmarks.md``, the proxy section).
The routes are also served without the ``/v1`` prefix, for clients configured with the server's root.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tooldispatch.backends.base import Event
from tooldispatch.errors import TooldispatchError
from tooldispatch.proxy.errors import ProxyError, from_backend, upstream_dropped
from tooldispatch.proxy.fields import decode_body, too_deep
from tooldispatch.proxy.guard import HEADER as GUARD_HEADER
from tooldispatch.proxy.guard import without_calls
from tooldispatch.proxy.stats import Recorder, RequestStats, record_json
from tooldispatch.proxy.stream import SseTurn
from tooldispatch.proxy.translate import Limits, ProxyRequest, ToolCache, new_id, read_request
from tooldispatch.proxy.turn import complete, dumps, first_events
from tooldispatch.proxy.upstream import Upstream

_log = logging.getLogger("tooldispatch.proxy")
_access = logging.getLogger("tooldispatch.proxy.access")
_BUDGET_HEADER = "x-tooldispatch-completion-budget"
_KEEPALIVE = b": waiting for the model\n\n"
"""An SSE comment: clients skip it, and it keeps a slow first answer's connection from looking dead."""


def _first(pending: asyncio.Future[Event]) -> Event | None:
    """The first event of a finished ``__anext__`` (``None`` for an empty stream); its error, raised."""
    try:
        return pending.result()
    except StopAsyncIteration:
        return None


_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class SseResponse:
    """Streams SSE bytes; a client that goes away cancels the stream (and with it the upstream request).

    Starlette's own streaming response notices a disconnect only when it next writes, which may be long
    after (a model reasoning, a call being held); this one watches for it while waiting.
    """

    def __init__(
        self,
        head: bytes,
        body: AsyncIterator[bytes],
        on_close: Callable[[bool], Awaitable[None]],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send ``head`` (what is ready when the response starts) at once, then stream ``body``;
        ``on_close(disconnected)`` is awaited once the stream has ended either way (also when ``body`` never
        started, so it must release what ``body`` would have). ``headers`` are added to the SSE headers."""
        self.headers = _SSE_HEADERS + [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        self.head = head
        self.body = body
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = False
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        async with anyio.create_task_group() as group:

            async def watch() -> None:
                nonlocal disconnected
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        disconnected = True
                        group.cancel_scope.cancel()
                        return

            try:
                if self.head:  # before the watcher starts: the first token does not wait for it
                    await send({"type": "http.response.body", "body": self.head, "more_body": True})
                group.start_soon(watch)
                async for chunk in self.body:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OSError:
                disconnected = True
            group.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            aclose = getattr(self.body, "aclose", None)
            if aclose is not None:
                await aclose()
            await self.on_close(disconnected)
        if not disconnected:
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})


def _header(scope: Scope, name: bytes) -> str | None:
    """The value of the request header ``name`` (lower case, as ASGI gives header names), if sent."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _too_big(bound: int) -> ProxyError:
    return ProxyError(413, f"the request body is over {bound} bytes (--max-body-bytes)", code="request_too_large")


def _too_slow(where: str, timeout_s: float, what: str) -> ProxyError:
    """504 ``upstream_timeout``: the upstream did not ``what`` within ``--timeout``."""
    return ProxyError(
        504,
        f"{where} did not {what} within {timeout_s:g} s (--timeout); check that it is not overloaded, or raise "
        "--timeout",
        type="timeout",
        code="upstream_timeout",
    )


def _internal(exc: Exception) -> ProxyError:
    return ProxyError(
        500,
        f"the proxy failed ({type(exc).__name__}); the proxy's log has the traceback, please report it",
        type="server_error",
        code="internal_error",
    )


def _marks(stats: RequestStats, answer: Mapping[str, Any] | None) -> dict[str, str]:
    """The headers that say what the proxy changed: the clamped completion budget, a guarded answer."""
    headers: dict[str, str] = {}
    if stats.budget is not None:
        headers[_BUDGET_HEADER] = str(stats.budget)
    if answer is not None and "tooldispatch" in answer:
        headers[GUARD_HEADER] = ",".join(c["name"] for c in answer["tooldispatch"]["repeat_guard"]["repeated"])
    return headers


def access_line(stats: RequestStats) -> str:
    """One request as the access log writes it: status, model, mode, tokens, calls by bucket, time (never a key
    or a body)."""
    tokens = f"{stats.prompt_tokens}+{stats.completion_tokens}" if stats.prompt_tokens is not None else "-"
    buckets = ",".join(f"{k}:{v}" for k, v in sorted(stats.buckets.items())) or "-"
    parts = [
        f"POST /v1/chat/completions {stats.status}",
        f"model={stats.model}",
        f"mode={stats.mode}",
        f"stream={'yes' if stats.stream else 'no'}",
        f"tokens={tokens}",
        f"calls={stats.calls}",
        f"buckets={buckets}",
        f"finish={stats.finish_reason or '-'}",
        f"{stats.latency_s * 1000:.1f}ms",
    ]
    if stats.error:
        parts.append(f"error={stats.error}")
    if stats.flags:
        parts.append(f"flags={stats.flags}")
    return " ".join(parts)


def _error(err: ProxyError) -> Response:
    return Response(dumps(err.body()), status_code=err.status, media_type="application/json", headers=err.headers)


@dataclass
class Proxy:
    """The proxy's routes over one upstream.

    Attributes:
        upstream: what requests are served by.
        limits: request bounds.
        api_key: the key every request must carry (``None``: no key needed).
        recorder: where requests are counted (``None``: not counted).
        record: keep request bodies, raw outputs and answers (``--record``).
        tool_cache: the tool lists already checked (``ToolCache``: agents send the same tools every turn).
        repeat_guard: answer a turn that only repeats answered calls without calls (``guard``).
        access_log: one log line per request (``--quiet`` turns it off).
        client_timeout_s: how long a client may take to send its request body, in all (its head is bounded by
            the server's protocol, ``server.with_head_timeout``).
        keepalive_s: how long a streamed answer waits for the model's first event before the response starts
            with SSE comments, one every ``keepalive_s`` until that event comes (a long prefill on a CPU outlasts
            clients that give up on a silent connection: Qwen Code after 120 s).
    """

    upstream: Upstream
    limits: Limits
    api_key: str | None = None
    recorder: Recorder | None = None
    record: bool = False
    tool_cache: ToolCache = field(default_factory=ToolCache, repr=False)
    repeat_guard: bool = True
    access_log: bool = True
    client_timeout_s: float = 60.0
    keepalive_s: float = 15.0

    def __repr__(self) -> str:
        return f"Proxy(upstream={self.upstream!r}, limits={self.limits!r}, key={'set' if self.api_key else 'none'})"

    # -- checks ---------------------------------------------------------------------------------------

    def _authorize(self, scope: Scope) -> None:
        if self.api_key is None:
            return
        header = _header(scope, b"authorization") or ""
        given = header[7:].strip() if header[:7].lower() == "bearer " else _header(scope, b"x-api-key") or ""
        if not given or not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise ProxyError(
                401,
                "missing or wrong API key: send the proxy's key as 'Authorization: Bearer KEY'",
                type="authentication_error",
                code="invalid_api_key",
            )

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        bound = self.limits.max_body_bytes
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > bound:
            raise _too_big(bound)
        parts: list[bytes] = []
        size = 0
        deadline = asyncio.get_running_loop().time() + self.client_timeout_s  # the whole body, not each read
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise ProxyError(
                    408,
                    f"the request body did not arrive within {self.client_timeout_s:g} s; send it whole, promptly",
                    code="request_timeout",
                ) from None
            if message["type"] == "http.disconnect":
                raise ProxyError(499, "the client went away before its request was read", code="client_disconnected")
            part = message.get("body", b"")
            size += len(part)
            if size > bound:
                raise _too_big(bound)
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)

    def _stats(self, request: ProxyRequest | None, *, stream: bool) -> RequestStats:
        up = self.upstream
        mode = up.mode if request is None or request.tools or not up.forwards else "forward"
        return RequestStats(
            id=new_id("req_"),
            model=up.label,
            quant=up.quant,
            engine=up.engine,
            mode=mode,
            stream=stream,
            tools=len(request.tools) if request is not None else 0,
            tool_choice=request.tool_choice if request is not None else "auto",
        )

    def _count(self, stats: RequestStats, started: float) -> None:
        stats.latency_s = time.monotonic() - started
        if self.recorder is not None:
            self.recorder.add(stats)
        if self.access_log:
            _access.info("%s", access_line(stats))

    # -- routes ---------------------------------------------------------------------------------------

    async def chat(self, scope: Scope, receive: Receive) -> Response | SseResponse:
        """``POST /v1/chat/completions``: the answer to send, an ASGI callable."""
        started = time.monotonic()
        proxied: ProxyRequest | None = None
        stats: RequestStats | None = None
        try:
            self._authorize(scope)
            raw = await self._body(scope, receive)
            body = decode_body(raw)
            proxied = read_request(
                body,
                limits=self.limits,
                constrained=self.upstream.constrained,
                tool_cache=self.tool_cache,
                local=self.upstream.mode == "in-process",
            )
            stats = self._stats(proxied, stream=proxied.stream)
            if not proxied.tools and self.upstream.forwards:
                return await self._forward(proxied, raw, stats, started)
            if proxied.stream:
                return await self._stream(proxied, stats, started)
            answer = await complete(self.upstream, proxied, stats, record=self.record, guard=self.repeat_guard)
        except ProxyError as err:
            return self._failed(err, proxied, stats, started)
        except TooldispatchError as exc:
            return self._failed(from_backend(exc, local=self.upstream.mode == "in-process"), proxied, stats, started)
        except RecursionError:  # a body nested deeper than Python's decoder or a schema check goes
            return self._failed(too_deep(), proxied, stats, started)
        except Exception as exc:  # a defect of ours: answered in OpenAI's shape, logged with its traceback
            _log.exception("the proxy failed on a request")
            return self._failed(_internal(exc), proxied, stats, started)
        self._count(stats, started)
        return Response(dumps(answer), media_type="application/json", headers=_marks(stats, answer))

    def _failed(
        self, err: ProxyError, proxied: ProxyRequest | None, stats: RequestStats | None, started: float
    ) -> Response:
        stats = stats or self._stats(proxied, stream=bool(proxied and proxied.stream))
        stats.status, stats.error = err.status, err.code
        self._count(stats, started)
        _log.info("answered %d %s: %s", err.status, err.code, err.message)
        return _error(err)

    async def _stream(self, request: ProxyRequest, stats: RequestStats, started: float) -> SseResponse:
        """Start the upstream turn; errors before its first event are answered with their own status.

        The request goes out first; the stream's parser is built while the upstream works on it. The opening
        chunk and what the first event completes go out together, as soon as that event arrives; after that,
        what each event completes goes out in one write. When the first event takes longer than
        ``keepalive_s``, the response starts with an SSE comment instead and sends one every ``keepalive_s``
        until the event comes; an error after that is an error event, as it is later in any stream.
        """
        events = first_events(self.upstream, request, stats, stream=True)
        iterator = events.__aiter__()
        pending = asyncio.ensure_future(iterator.__anext__())
        await asyncio.sleep(0)  # let the request go out before the parser is built
        first: Event | None = None
        try:
            turn = SseTurn(request, self.upstream.model, stats, record=self.record, guard=self.repeat_guard)
            await asyncio.wait({pending}, timeout=self.keepalive_s)
            waiting = not pending.done()
            if waiting:
                head = _KEEPALIVE
            else:
                first = _first(pending)
                head = turn.opening() + (b"".join(turn.feed(first)) if first is not None else b"")
                stats.first_token_s = time.monotonic() - started
        except BaseException:
            pending.cancel()
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(BaseException):
                    await pending
                await events.aclose()
            raise

        async def body() -> AsyncIterator[bytes]:
            nonlocal first
            try:
                if waiting:
                    while not (await asyncio.wait({pending}, timeout=self.keepalive_s))[0]:
                        yield _KEEPALIVE
                    first = _first(pending)
                    yield turn.opening() + (b"".join(turn.feed(first)) if first is not None else b"")
                    stats.first_token_s = time.monotonic() - started
                if first is not None:
                    async for event in iterator:
                        if out := turn.feed(event):
                            yield b"".join(out)
                if out := turn.settle():
                    yield b"".join(out)
                if turn.guarded:
                    retry = first_events(self.upstream, without_calls(request), stats, stream=True)
                    try:
                        async for event in retry:
                            if out := turn.feed_retry(event):
                                yield b"".join(out)
                    finally:
                        with anyio.CancelScope(shield=True):
                            await retry.aclose()
                yield b"".join(turn.close())
            except Exception as exc:
                if isinstance(exc, ProxyError):
                    err = exc
                elif isinstance(exc, TooldispatchError):
                    err = from_backend(exc, local=self.upstream.mode == "in-process")
                else:  # a defect of ours: the client still gets an error event, not a cut stream
                    _log.exception("the proxy failed while streaming")
                    err = _internal(exc)
                stats.status, stats.error = err.status, err.code
                yield err.sse()
                yield b"data: [DONE]\n\n"
            finally:
                with anyio.CancelScope(shield=True):
                    await stop_upstream()

        async def stop_upstream() -> None:
            """End the upstream turn: the wait for its first event too, when the client left during it."""
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
            await events.aclose()  # a no-op when it is already closed

        async def closed(disconnected: bool) -> None:
            await stop_upstream()
            if disconnected:
                stats.status, stats.error = 499, "client_disconnected"
            if self.record:
                stats.record = record_json(request.body, turn.raw_output(), turn.answer())
            self._count(stats, started)

        return SseResponse(head, body(), closed, _marks(stats, None))

    async def _forward(
        self, request: ProxyRequest, raw: bytes, stats: RequestStats, started: float
    ) -> Response | SseResponse:
        """Send a request without tools to the HTTP upstream as it came, and its answer back as it comes.

        It goes through the backend's own client (its errors are the backend's, answered by ``from_backend``);
        ``timeout_s`` bounds the whole answer of a non-streamed request and each gap of a streamed one.
        """
        up = self.upstream
        http = up.http
        assert http is not None
        where = f"the upstream at {http.base_url}"
        try:
            async with asyncio.timeout(up.timeout_s):
                reply = await http.send(up.forward_body(request.body, raw))
        except TimeoutError as exc:
            raise _too_slow(where, up.timeout_s, "answer") from exc
        if reply.status in (401, 403):
            await reply.close()
            raise ProxyError(
                502,
                f"{where} rejected the proxy's own key (HTTP {reply.status}); "
                "set the upstream key's environment variable the profile names",
                type="upstream_error",
                code="upstream_auth",
            )
        kind = reply.headers.get("content-type", "application/json")
        if not request.stream or reply.status != 200 or not kind.startswith("text/event-stream"):
            try:
                async with asyncio.timeout(up.timeout_s):  # the whole answer, not each read
                    content = await http.read(reply)
            except TimeoutError as exc:
                raise _too_slow(where, up.timeout_s, "finish its answer") from exc
            stats.status = reply.status
            if reply.status != 200:
                stats.error = "upstream_status"
            if self.record:
                stats.record = record_json(request.body, {"forwarded": True}, content.decode("utf-8", "replace"))
            self._count(stats, started)
            passed = {k: v for k, v in reply.headers.items() if k in ("retry-after", "retry-after-ms")}
            return Response(content, status_code=reply.status, media_type=kind, headers=passed)
        pieces = http.pieces(reply)

        async def body() -> AsyncIterator[bytes]:
            tail = b""  # the end of what went out: a whole stream ends with its [DONE] event
            try:
                first = True
                while True:
                    try:
                        async with asyncio.timeout(up.timeout_s):  # each gap of the stream
                            part = await anext(pieces)
                    except StopAsyncIteration:
                        break
                    except TimeoutError as exc:
                        raise _too_slow(where, up.timeout_s, "send the next part of its stream") from exc
                    if first:
                        stats.first_token_s = time.monotonic() - started
                        first = False
                    tail = (tail + part)[-64:]
                    yield part
                if b"data: [DONE]" not in tail:
                    raise upstream_dropped(
                        f"the stream from {where} ended without its terminator ([DONE]): "
                        "the answer was cut off; the server may have crashed or restarted"
                    )
            except (TooldispatchError, ProxyError) as exc:
                err = exc if isinstance(exc, ProxyError) else from_backend(exc)
                stats.status, stats.error = err.status, err.code
                yield b"\n\n" + err.sse() + b"data: [DONE]\n\n"
            finally:
                with anyio.CancelScope(shield=True):
                    await pieces.aclose()

        async def closed(disconnected: bool) -> None:
            await reply.close()  # a no-op when body() already closed it
            if disconnected:
                stats.status, stats.error = 499, "client_disconnected"
            self._count(stats, started)

        return SseResponse(b"", body(), closed)

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the one model this proxy serves."""
        try:
            self._authorize(request.scope)
        except ProxyError as err:
            return _error(err)
        entry = {"id": self.upstream.model, "object": "model", "created": 0, "owned_by": "tooldispatch"}
        return Response(dumps({"object": "list", "data": [entry]}), media_type="application/json")

    async def health(self, request: Request) -> Response:
        """``GET /health``: the proxy is up, and what it serves."""
        try:
            self._authorize(request.scope)
        except ProxyError as err:
            return _error(err)
        up = self.upstream
        info: dict[str, Any] = {
            "status": "ok",
            "model": up.model,
            "quant": up.quant,
            "engine": up.engine,
            "mode": up.mode,
        }
        return Response(dumps(info), media_type="application/json")


class ChatRoute:
    """``Proxy.chat`` as a plain ASGI endpoint (Starlette passes an endpoint that is not a function on as it is)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self.proxy.chat(scope, receive)
        await answer(scope, receive, send)


def build_app(proxy: Proxy) -> Starlette:
    """The Starlette application for ``proxy``; the recorder and the upstream's connections follow its lifespan."""
    chat = ChatRoute(proxy)
    routes: list[Route] = []
    for prefix in ("/v1", ""):
        routes.append(Route(f"{prefix}/chat/completions", chat, methods=["POST"]))
        routes.append(Route(f"{prefix}/models", proxy.models, methods=["GET"]))
    routes.append(Route("/health", proxy.health, methods=["GET"]))

    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if proxy.recorder is not None:
            proxy.recorder.start()
        try:
            yield
        finally:
            if proxy.recorder is not None:
                await proxy.recorder.stop()
            await proxy.upstream.aclose()

    return Starlette(routes=routes, lifespan=lifespan)
