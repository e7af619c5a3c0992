"""The ``openai_compat`` backend: vLLM, llama-server, llama-cpp-python's server and OpenRouter.

It talks to ``/v1/chat/completions`` through its own kept-alive HTTP client (``backends.http``, framing by
``httptools``), the one the proxy uses for the same upstream too, and turns the answer into the events of
``tooldispatch.backends.base``; ``dialects`` does the payload normalization and ``wire_errors`` the error
translation.

Two parse modes:

``parse="server"``
    ``tools`` and ``tool_choice`` are sent; the server renders them with its chat template and extracts
    the calls (vLLM ``--enable-auto-tool-choice --tool-call-parser``, llama-server ``--jinja``). Calls
    arrive as ``ToolCallDelta`` events; the agent repairs and validates them
    (``parse_tool_calls(native_calls=...)``).
``parse="client"``
    ``tools`` are *not* sent. The tool declarations go into the system message in the model family's
    tool prompt format (``tool_format``, from ``tooldispatch.prompting``; ``hermes`` by default), so no
    server-side tool parser runs on any engine (llama-server's ``--jinja`` extraction only runs when a
    request carries ``tools``) and the raw text reaches tooldispatch's own parser as ``ContentDelta``
    events. This is the same on every dialect and needs no special server flag; it measures the model
    and our parser, not the server's extraction. Reasoning fields are still split by the server when it
    is configured to (that is not tool parsing).

Constrained decoding (``ChatRequest.constrained``) works in client mode on the ``llama-server`` dialect:
the GBNF grammar of the tool format is sent in the body's ``grammar`` field, which llama.cpp's server and
llama-cpp-python's both accept. Other dialects report ``constrained=False`` in their capabilities and
ignore the flag.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final, Literal

from tooldispatch.backends import wire_errors
from tooldispatch.backends.base import OMIT, Capabilities, ChatRequest, Event, Finish
from tooldispatch.backends.dialects import DIALECTS, Dialect, StreamNormalizer, response_events
from tooldispatch.backends.http import HttpPool, Reply, UpstreamError, UpstreamTimeout
from tooldispatch.backends.wire_errors import ErrorContext
from tooldispatch.errors import BackendError, BackendTimeout, ConfigError, ProviderError
from tooldispatch.toolspec import ToolSpec

ParseMode = Literal["client", "server"]
ToolPrompt = Callable[[Sequence[ToolSpec]], str]

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False)  # built once: json.dumps with options builds one per call
_NOT_A_STREAM: Final = frozenset({"text/html", "application/json", "application/xhtml+xml"})
"""What error pages come as: a streamed request answered with one of these got no stream (a stream labelled
oddly, ``text/plain``, is still read as one)."""
_RETRIED: Final = frozenset({408, 409, 429, 500, 502, 503, 504})
_ENGINES: dict[str, str] = {"vllm": "vllm", "llama-server": "llama.cpp", "openrouter": "openrouter"}
_RENDERED_MAX = 32  # tool prompts kept per backend (``render_tools``)


def with_tool_prompt(messages: Sequence[Mapping[str, Any]], prompt: str) -> list[dict[str, Any]]:
    """Return ``messages`` with ``prompt`` appended to the first system message (or as a new one first)."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{prompt}" if out[0]["content"] else prompt
    else:
        out.insert(0, {"role": "system", "content": prompt})
    return out


def _quoted(value: Any) -> str:
    """What arrived, quoted and cut to 200 characters: text as it is, other JSON values as JSON."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, default=str)
        except ValueError:
            value = repr(value)
    return repr(value[:200])


async def _next_event(lines: AsyncIterator[str]) -> str:
    """The data of the next event of an event stream: its ``data:`` lines joined, once the blank line that ends
    it has arrived (comments and other fields skipped; an event the stream's end cut off is not one).

    Raises:
        StopAsyncIteration: the stream ended.
    """
    data: list[str] = []
    while True:
        line = await anext(lines)
        if not line:
            if data:
                return "\n".join(data)
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def tool_choice_value(choice: str) -> str | dict[str, Any]:
    """Map ``ChatRequest.tool_choice`` to the OpenAI field (a tool name becomes a named choice)."""
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class OpenAICompatBackend:
    """A backend for any OpenAI-compatible chat completions server.

    Example::

        backend = OpenAICompatBackend(base_url="http://127.0.0.1:8080/v1", model="qwen3", dialect="llama-server")
        async for event in backend.stream(ChatRequest(messages=[{"role": "user", "content": "hi"}])):
            ...
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dialect: Dialect,
        api_key_env: str | None = None,
        parse: ParseMode = "client",
        timeout_s: float | None = 600.0,
        idle_timeout_s: float | None = None,
        max_retries: int = 0,
        extra_body: Mapping[str, Any] | None = None,
        provider: Mapping[str, Any] | None = None,
        profile: str | None = None,
        tool_format: str = "hermes",
        tool_prompt: ToolPrompt | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Configure the backend; no request is sent yet.

        Args:
            base_url: the server's OpenAI API root, ending in ``/v1``.
            model: the model name the server expects in requests.
            dialect: ``vllm``, ``llama-server`` (llama.cpp's server and llama-cpp-python's) or ``openrouter``.
            api_key_env: environment variable holding the API key (``OPENROUTER_API_KEY``); local servers
                need none.
            parse: ``server`` to use the server's tool-call extraction, ``client`` to parse the raw text.
            timeout_s: the most seconds one request takes in all, streamed answers included (also the most
                seconds of each wait for more of the answer); ``None``: no bound here, the caller bounds the
                time (the proxy does, the same way for every backend).
            idle_timeout_s: the most seconds between two events of a stream (comment lines, such as
                keep-alives, do not count as events); ``None``: only ``timeout_s`` applies.
            max_retries: retries of a request that got no answer or a 408, 409, 429 or 5xx status, after the
                ``Retry-After`` the server asked for, or 0.5 s doubling up to 8 s.
            extra_body: fields added to every request body (``chat_template_kwargs``, ...).
            provider: OpenRouter routing (``only``, ``quantizations``, ``allow_fallbacks``,
                ``require_parameters``), sent as the body's ``provider`` object.
            profile: the profile this backend came from, named in error messages.
            tool_format: the model family's tool prompt format for ``parse="client"`` (``hermes``,
                ``hermes_list``, ``json``, ``pythonic``, ``gemma_tool_code``), also used for grammars.
            tool_prompt: a custom renderer of the tool declarations, instead of ``tool_format``'s.
            headers: extra HTTP headers.

        Raises:
            ConfigError: an unknown dialect, parse mode or tool format, or the key's environment variable is
                unset.
        """
        if dialect not in DIALECTS:
            raise ConfigError(f"unknown dialect {dialect!r}; use one of {', '.join(DIALECTS)}")
        if parse not in ("client", "server"):
            raise ConfigError(f"unknown parse mode {parse!r}; use 'client' or 'server'")
        from tooldispatch.prompting import get_format

        get_format(tool_format)
        key = ""
        if api_key_env:
            value = os.environ.get(api_key_env, "")
            if not value:
                raise ConfigError(
                    f"the {profile or dialect} backend needs an API key: set the environment variable {api_key_env}"
                )
            key = value
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.dialect: Dialect = dialect
        self.parse: ParseMode = parse
        self.api_key_env = api_key_env
        if (timeout_s is not None and timeout_s <= 0) or (idle_timeout_s is not None and idle_timeout_s <= 0):
            raise ConfigError("timeout_s and idle_timeout_s must be positive numbers of seconds")
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self.provider: dict[str, Any] | None = dict(provider) if provider else None
        self.profile = profile
        self.tool_format = tool_format
        self._tool_prompt = tool_prompt
        self._capabilities = Capabilities(  # built once: the proxy reads them on every request
            native_tools=parse == "server",
            reasoning_field=True,
            constrained=dialect == "llama-server" and parse == "client",
            engine=_ENGINES[dialect],
        )
        self._rendered: dict[int, tuple[Sequence[ToolSpec], str]] = {}
        self.max_retries = max_retries
        default_headers = dict(headers or {})
        if dialect == "openrouter":
            default_headers.setdefault("X-OpenRouter-Title", "tooldispatch")
        if key:
            default_headers["Authorization"] = f"Bearer {key}"
        self.http = HttpPool(self.base_url, timeout_s=timeout_s, headers=default_headers)
        """The one HTTP client of this upstream (the proxy forwards through it too)."""
        self._errors = ErrorContext(
            base_url=self.base_url,
            dialect=dialect,
            start_hint=self._start_hint(),
            api_key_env=api_key_env,
            routing=self.provider,
            timeout_s=timeout_s,
            secret=key or None,
        )

    def __repr__(self) -> str:
        return (
            f"OpenAICompatBackend(base_url={self.base_url!r}, model={self.model!r}, dialect={self.dialect!r}, "
            f"parse={self.parse!r}, tool_format={self.tool_format!r}, api_key_env={self.api_key_env!r})"
        )

    def _start_hint(self) -> str:
        if self.dialect == "openrouter":
            return "check your network connection and https://status.openrouter.ai"
        if self.profile:
            return f"start it with `tooldispatch serve --profile {self.profile}`"
        return "start the server (`tooldispatch serve --profile NAME`) or pass the right --base-url"

    @property
    def capabilities(self) -> Capabilities:
        """Native tools in server parse mode; reasoning arrives in its own field on all three dialects."""
        return self._capabilities

    def render_tools(self, tools: Sequence[ToolSpec]) -> str:
        """The system-prompt text that declares ``tools`` in client parse mode.

        The text is kept for the tuples of tools rendered last, found by identity (the proxy passes the same
        tuple for the same tools list): a pure cache of an immutable result; each entry holds its tuple, so an
        id is never reused while it is cached.
        """
        hit = self._rendered.get(id(tools))
        if hit is not None and hit[0] is tools:
            return hit[1]
        if self._tool_prompt is not None:
            text = self._tool_prompt(tools)
        else:
            from tooldispatch.prompting import get_format

            text = get_format(self.tool_format).system(tools)
        if type(tools) is tuple:
            if len(self._rendered) >= _RENDERED_MAX:
                self._rendered.clear()
            self._rendered[id(tools)] = (tools, text)
        return text

    def request_body(self, request: ChatRequest, *, stream: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """Build the keyword arguments and the ``extra_body`` for one request.

        Returns:
            ``(kwargs, extra_body)``: standard OpenAI fields, and the dialect's own fields.
        """
        messages: list[dict[str, Any]] = [dict(m) for m in request.messages]
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.tools and request.tool_choice != "none":
            if self.parse == "server":
                kwargs["tools"] = [t.to_openai() for t in request.tools]
                kwargs["tool_choice"] = tool_choice_value(request.tool_choice)
            else:
                messages = with_tool_prompt(messages, self.render_tools(request.tools))
        kwargs["messages"] = messages
        extra: dict[str, Any] = dict(self.extra_body)
        if request.constrained and request.tools and self.capabilities.constrained:
            from tooldispatch.prompting import tool_call_grammar

            extra["grammar"] = tool_call_grammar(request.tools, self.tool_format, tool_choice=request.tool_choice)
        if self.dialect == "openrouter":
            # OpenRouter now always reports usage (with cost); the flag is kept for deployments that still need it.
            extra.setdefault("usage", {"include": True})
            if self.provider:
                extra["provider"] = dict(self.provider)
        elif stream:
            kwargs["stream_options"] = {"include_usage": True}
        if self.dialect == "llama-server":
            # Keep the slot's KV cache and evaluate only the prompt's new suffix. No ``id_slot``: llama-server
            # sends a request to the idle slot whose prompt shares the longest prefix with it (and restores
            # displaced prompts from its host-memory cache), while a pinned slot would make the request wait
            # for that slot when another is idle. A profile's ``extra_body`` can still pin one.
            extra.setdefault("cache_prompt", True)
        extra.update(request.extra)
        return kwargs, extra

    def request_json(self, request: ChatRequest, *, stream: bool) -> bytes:
        """The request's body as JSON bytes: ``request_body``'s fields (less those set to ``OMIT``) and ``stream``."""
        kwargs, extra = self.request_body(request, stream=stream)
        body = {**kwargs, **extra, "stream": stream}
        return _ENCODER.encode({k: v for k, v in body.items() if v is not OMIT}).encode()

    async def send(self, body: bytes) -> Reply:
        """``POST /chat/completions`` with ``body`` as it is; the answer's status and headers, its body to read.

        Requests that got no answer, or a status worth retrying, are tried again ``max_retries`` times.

        Raises:
            BackendUnavailable: the server cannot be reached (``BackendTimeout``: not within the timeout).
        """
        attempt = 0
        while True:
            try:
                reply = await self.http.post("/chat/completions", body)
            except UpstreamTimeout as exc:
                if attempt >= self.max_retries:
                    raise wire_errors.timed_out(self._errors) from exc
                wait = None
            except UpstreamError as exc:
                if attempt >= self.max_retries:
                    raise wire_errors.unreachable(exc, self._errors) from exc
                wait = None
            else:
                if reply.status not in _RETRIED or attempt >= self.max_retries:
                    return reply
                wait = wire_errors.parse_retry_after(reply.headers)
                await reply.close()
            await asyncio.sleep(min(8.0, wait if wait is not None else 0.5 * 2**attempt))
            attempt += 1

    async def answer(self, body: bytes) -> Reply:
        """``send``, with an error status raised as the project's error (read from the body the server sent).

        Raises:
            BackendUnavailable: the server cannot be reached or did not answer in time.
            RateLimited: HTTP 429; ``retry_after`` from ``Retry-After``.
            ProviderError: any other error status.
        """
        reply = await self.send(body)
        if reply.status < 400:
            return reply
        raw = await self.read(reply)
        raise wire_errors.status_error(reply.status, reply.headers, raw, self._errors)

    async def read(self, reply: Reply) -> bytes:
        """The whole body of ``reply``.

        Raises:
            BackendDropped: the connection broke in the middle of it; ``BackendTimeout``: it stopped coming.
        """
        try:
            return await reply.read()
        except UpstreamTimeout as exc:
            raise wire_errors.timed_out(self._errors) from exc
        except UpstreamError as exc:
            raise wire_errors.dropped(exc, self._errors) from exc

    async def pieces(self, reply: Reply) -> AsyncGenerator[bytes, None]:
        """The body of ``reply`` as it arrives, closed at the end (errors as ``read``'s)."""
        try:
            while piece := await reply.piece():
                yield piece
        except UpstreamTimeout as exc:
            raise wire_errors.timed_out(self._errors) from exc
        except UpstreamError as exc:
            raise wire_errors.dropped(exc, self._errors) from exc
        finally:
            await reply.close()

    def _bound(self, whole: float | None) -> float | None:
        """The deadline of the next wait: the whole request's, or sooner the gap's (``idle_timeout_s``)."""
        idle = self.idle_timeout_s
        if idle is None:
            return whole
        until = asyncio.get_running_loop().time() + idle
        return until if whole is None else min(whole, until)

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Run one turn with ``stream=True`` and yield its events, ending with ``Finish``.

        ``timeout_s`` bounds the whole request, from sending it to the last event, and ``idle_timeout_s``
        the wait for each next event; a stream that ends without a finish reason was cut off.

        Raises:
            BackendUnavailable: the server cannot be reached or did not answer in time (``BackendTimeout``),
                went silent, dropped the connection mid-stream or ended the stream before its end
                (``BackendDropped``).
            RateLimited: HTTP 429; ``retry_after`` from ``Retry-After``.
            ProviderError: any other error status, an error inside the 200 stream, or an event that is not a
                chat completion chunk.
        """
        body = self.request_json(request, stream=True)
        loop = asyncio.get_running_loop()
        whole = loop.time() + self.timeout_s if self.timeout_s is not None else None
        try:
            async with asyncio.timeout_at(whole):
                reply = await self.answer(body)
        except TimeoutError:
            raise self._too_slow() from None
        normalizer = StreamNormalizer(self.dialect)
        done = False
        try:
            media = reply.headers.get("content-type", "").split(";")[0].strip().lower()
            if media in _NOT_A_STREAM:
                text = (await self.read(reply)).decode("utf-8", "replace")
                raise ProviderError(
                    f"the {self.dialect} endpoint at {self.base_url} answered a streamed request with "
                    f"{media} instead of an event stream: {_quoted(text)}"
                )
            lines = aiter(reply.lines())
            while True:
                until = self._bound(whole)
                try:
                    if until is None:  # no bound here (the caller's): no timer per event
                        data = await _next_event(lines)
                    else:
                        async with asyncio.timeout_at(until):
                            data = await _next_event(lines)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise self._silent(whole, until) from None
                data = data.strip()
                if data == "[DONE]":
                    done = True
                    await reply.drain()
                    break
                for event in normalizer.feed(self._chunk(data)):
                    yield event
        except UpstreamTimeout as exc:
            raise wire_errors.timed_out(self._errors) from exc
        except UpstreamError as exc:
            raise wire_errors.dropped(exc, self._errors) from exc
        finally:
            await reply.close()
        events = normalizer.finish()
        last = events[-1] if events else None
        if not done and (not isinstance(last, Finish) or last.reason is None):
            raise wire_errors.cut_off(self._errors)
        for event in events:
            yield event

    def _chunk(self, data: str) -> dict[str, Any]:
        """One stream event's data as a chunk; the error it carries, or what it is when it is not a chunk, raised."""
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = data
        if not isinstance(chunk, dict):
            raise ProviderError(
                f"the {self.dialect} endpoint at {self.base_url} sent a stream event that is not a chat "
                f"completion chunk: {_quoted(chunk)}"
            )
        if chunk.get("error"):
            raise wire_errors.stream_error(chunk["error"], self._errors)
        return chunk

    def _silent(self, whole: float | None, until: float | None) -> BackendError:
        idle = self.idle_timeout_s
        if idle is not None and (whole is None or (until is not None and until < whole)):
            return BackendTimeout(
                f"the {self.dialect} endpoint at {self.base_url} sent no stream event for {idle:g} s; "
                "check that it is running and not overloaded, or raise idle_timeout_s"
            )
        return self._too_slow()

    def _too_slow(self) -> BackendTimeout:
        return BackendTimeout(
            f"the {self.dialect} endpoint at {self.base_url} did not finish its answer within {self.timeout_s:g} s; "
            "check that it is running and not overloaded, or raise the timeout"
        )

    async def complete(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Run one turn without streaming and yield the same events ``stream`` would have.

        Raises:
            BackendUnavailable: the server cannot be reached or did not answer in time.
            RateLimited: HTTP 429; ``retry_after`` from ``Retry-After``.
            ProviderError: any other error status, an error object in the response, or a body that is not
                a chat completion.
        """
        body = self.request_json(request, stream=False)
        try:
            async with asyncio.timeout(self.timeout_s):
                raw = await self.read(await self.answer(body))
        except TimeoutError:
            raise self._too_slow() from None
        try:
            payload: Any = json.loads(raw)
        except ValueError:
            payload = raw.decode("utf-8", "replace")
        if not isinstance(payload, dict):
            raise ProviderError(
                f"the {self.dialect} endpoint at {self.base_url} answered with something that is not a chat "
                f"completion: {_quoted(payload)}"
            )
        for event in response_events(payload, self.dialect):
            yield event

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.http.aclose()

    async def __aenter__(self) -> OpenAICompatBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
