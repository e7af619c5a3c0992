"""The proxy's own path to an HTTP upstream: ``OpenAICompatBackend``'s request, sent without the SDK.

Why a second path: the ``openai`` SDK costs more per request (transforming every message of the body,
building its options, validating the answer into models and back) than the proxy's whole latency budget
(≤ 1 ms added, ``tooldispatch bench proxy``). This path keeps every decision of the backend and sends the
same body: the body is ``OpenAICompatBackend.request_body`` (tools or the tool prompt, the grammar, the
dialect's fields), the answer is read by the backend's own pure functions (``dialects.response_events``,
``StreamNormalizer``), and errors are translated by ``wire_errors.translate_error`` from the same ``openai``
exceptions the SDK would raise. A test replays the recorded wire fixtures through both paths and compares
their events.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import httpx2
import openai

from tooldispatch.backends.base import ChatRequest, Event, Finish
from tooldispatch.backends.dialects import StreamNormalizer, response_events
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.backends.wire_errors import ErrorContext, translate_error
from tooldispatch.errors import ProviderError
from tooldispatch.proxy.errors import upstream_dropped
from tooldispatch.proxy.http1 import DRAIN_S, Http1Pool, Reply, UpstreamError, UpstreamTimeout

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False)
_NOT_A_STREAM: Final = frozenset({"text/html", "application/json", "application/xhtml+xml"})
"""What error pages come as: a streamed request answered with one of these got no stream (a stream labelled
oddly, ``text/plain``, is still read as one)."""  # built once: json.dumps with options builds one per call


def error_context(backend: OpenAICompatBackend) -> ErrorContext:
    """What error messages say about ``backend`` (the key only to mask it)."""
    key = os.environ.get(backend.api_key_env, "") if backend.api_key_env else ""
    start = (
        "check your network connection and https://status.openrouter.ai"
        if backend.dialect == "openrouter"
        else "start the upstream server, or pass the right --base-url"
    )
    return ErrorContext(
        base_url=backend.base_url,
        dialect=backend.dialect,
        start_hint=start,
        api_key_env=backend.api_key_env,
        routing=backend.provider,
        timeout_s=backend.timeout_s,
        secret=key or None,
    )


def request_json(backend: OpenAICompatBackend, request: ChatRequest, *, stream: bool) -> bytes:
    """The body the backend would send, as JSON bytes (fields set to ``openai.Omit`` left out)."""
    kwargs, extra = backend.request_body(request, stream=stream)
    body: dict[str, Any] = {**kwargs, **extra, "stream": stream}
    return _ENCODER.encode({k: v for k, v in body.items() if not isinstance(v, openai.Omit)}).encode()


def _json_or_text(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _not_json(what: str, text: str) -> ProviderError:
    return ProviderError(
        f"the upstream sent {what} that is not JSON ({text[:120]!r}); check that it speaks the OpenAI chat "
        "completions API"
    )


def _stream_error(error: Any, request: httpx2.Request) -> openai.APIError:
    """The SDK's own exception for an error object inside a 200 stream (so it is translated the same way)."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return openai.APIError(message=message, request=request, body=error)


class _HttpxReply:
    """An ``httpx2`` answer (HTTPS upstreams) with the interface of ``http1.Reply``."""

    def __init__(self, response: httpx2.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = {k.lower(): v for k, v in response.headers.items()}
        self._lines: AsyncIterator[str] | None = None

    @staticmethod
    async def open(http: httpx2.AsyncClient, url: str, body: bytes) -> _HttpxReply:
        try:
            response = await http.send(http.build_request("POST", url, content=body), stream=True)
        except httpx2.TimeoutException as exc:
            raise UpstreamTimeout(str(exc) or type(exc).__name__) from exc
        except httpx2.HTTPError as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc
        return _HttpxReply(response)

    async def read(self) -> bytes:
        try:
            return await self.response.aread()
        except httpx2.TimeoutException as exc:
            raise UpstreamTimeout(str(exc) or type(exc).__name__) from exc
        except httpx2.HTTPError as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            await self.response.aclose()

    def lines(self) -> AsyncIterator[str]:
        if self._lines is None:
            self._lines = self._read_lines()
        return self._lines

    async def _read_lines(self) -> AsyncIterator[str]:
        try:
            async for line in self.response.aiter_lines():
                yield line
        except httpx2.TimeoutException as exc:
            raise UpstreamTimeout(str(exc) or type(exc).__name__) from exc
        except httpx2.HTTPError as exc:
            raise UpstreamError(f"{type(exc).__name__}: {exc}") from exc

    async def drain(self) -> None:
        """Read the rest of the stream, for at most ``DRAIN_S`` seconds (so the connection can be reused)."""
        try:
            async with asyncio.timeout(DRAIN_S):
                async for _ in self.lines():
                    pass
        except (TimeoutError, UpstreamError):
            pass

    async def close(self) -> None:
        await self.response.aclose()


Transport = Http1Pool | httpx2.AsyncClient
"""How the proxy reaches an upstream: its own HTTP/1.1 client for ``http://``, ``httpx2`` for ``https://``."""


def transport_for(base_url: str, *, timeout_s: float, headers: Mapping[str, str]) -> Transport:
    """The transport for ``base_url``."""
    if base_url.startswith("http://"):
        return Http1Pool(base_url, timeout_s=timeout_s, headers=headers)
    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(timeout_s, connect=min(10.0, timeout_s)),
        limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=200),
        headers=dict(headers),
    )


async def wire_events(
    backend: OpenAICompatBackend, transport: Transport, request: ChatRequest, *, stream: bool
) -> AsyncIterator[Event]:
    """Run one turn against the backend's server and yield the events ``backend.stream``/``complete`` would.

    Raises:
        BackendUnavailable: the server cannot be reached, timed out, or dropped the stream.
        RateLimited: HTTP 429.
        ProviderError: any other error status, an error inside a 200 stream, or a payload that is not JSON.
    """
    url = f"{backend.base_url}/chat/completions"
    body = request_json(backend, request, stream=stream)
    received = False
    answered = False  # the upstream's answer has begun (a break after this is a drop, not an unreachable server)
    reply: Reply | _HttpxReply | None = None
    try:
        if isinstance(transport, Http1Pool):
            reply = await transport.post("/chat/completions", body)
        else:
            reply = await _HttpxReply.open(transport, url, body)
        if reply.status >= 400:
            raw = await reply.read()
            response = httpx2.Response(reply.status, headers=reply.headers, request=httpx2.Request("POST", url))
            error = openai.APIStatusError(f"HTTP {reply.status}", response=response, body=_json_or_text(raw))
            raise translate_error(error, error_context(backend)) from None
        answered = True
        media = reply.headers.get("content-type", "").split(";")[0].strip().lower()
        if stream and media in _NOT_A_STREAM:
            text = (await reply.read()).decode("utf-8", "replace")
            raise ProviderError(
                f"the {backend.dialect} endpoint at {backend.base_url} answered a streamed request with {media} "
                f"instead of an event stream: {text[:200]!r}"
            )
        if not stream:
            raw = await reply.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                raise _not_json("a response", raw.decode("utf-8", "replace")) from None
            for event in response_events(payload, backend.dialect):
                yield event
            return
        normalizer = StreamNormalizer(backend.dialect)
        done = False
        async for line in reply.lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                await reply.drain()
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise _not_json("a stream chunk", data) from None
            if isinstance(chunk, dict) and chunk.get("error"):
                failed = _stream_error(chunk["error"], httpx2.Request("POST", url))
                raise translate_error(failed, error_context(backend)) from None
            received = True
            for event in normalizer.feed(chunk):
                yield event
        events = normalizer.finish()
        last = events[-1] if events else None
        if not done and (not isinstance(last, Finish) or last.reason is None):
            raise upstream_dropped(
                f"the stream from the {backend.dialect} endpoint at {backend.base_url} ended without its terminator "
                "(no finish reason, no [DONE]): the answer was cut off; the server may have crashed or restarted"
            )
        for event in events:
            yield event
    except UpstreamTimeout as exc:
        timeout = openai.APITimeoutError(request=httpx2.Request("POST", url))
        timeout.__cause__ = exc
        raise translate_error(timeout, error_context(backend), mid_stream=received) from timeout
    except UpstreamError as exc:
        if answered:
            raise upstream_dropped(
                f"the connection to the {backend.dialect} endpoint at {backend.base_url} dropped in the middle of "
                f"the answer ({exc}); the server may have crashed or restarted"
            ) from exc
        broken = openai.APIConnectionError(request=httpx2.Request("POST", url))
        broken.__cause__ = exc
        raise translate_error(broken, error_context(backend), mid_stream=received) from broken
    finally:
        if reply is not None:
            await reply.close()
