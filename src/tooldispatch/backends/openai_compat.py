"""The ``openai_compat`` backend: vLLM, llama-server, llama-cpp-python's server and OpenRouter.

It talks to ``/v1/chat/completions`` with the official ``openai`` client (``AsyncOpenAI``) and turns the
answer into the events of ``tooldispatch.backends.base``; ``dialects`` does the payload normalization and
``wire_errors`` the error translation.

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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

import openai
import pydantic

from tooldispatch.backends.base import Capabilities, ChatRequest, Event, Finish
from tooldispatch.backends.dialects import DIALECTS, Dialect, StreamNormalizer, response_events
from tooldispatch.backends.wire_errors import ErrorContext, translate_error
from tooldispatch.errors import BackendUnavailable, ConfigError, ProviderError
from tooldispatch.toolspec import ToolSpec

ParseMode = Literal["client", "server"]
ToolPrompt = Callable[[Sequence[ToolSpec]], str]

_NO_KEY = "sk-no-key-required"
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
        timeout_s: float = 600.0,
        idle_timeout_s: float | None = None,
        max_retries: int = 0,
        extra_body: Mapping[str, Any] | None = None,
        provider: Mapping[str, Any] | None = None,
        profile: str | None = None,
        tool_format: str = "hermes",
        tool_prompt: ToolPrompt | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: Any = None,
    ) -> None:
        """Configure the backend; no request is sent yet.

        Args:
            base_url: the server's OpenAI API root, ending in ``/v1``.
            model: the model name the server expects in requests.
            dialect: ``vllm``, ``llama-server`` (llama.cpp's server and llama-cpp-python's) or ``openrouter``.
            api_key_env: environment variable holding the API key (``OPENROUTER_API_KEY``); local servers
                need none.
            parse: ``server`` to use the server's tool-call extraction, ``client`` to parse the raw text.
            timeout_s: the most seconds one request takes in all, streamed answers included.
            idle_timeout_s: the most seconds between two events of a stream (comment lines, such as
                keep-alives, do not count as events); ``None``: only ``timeout_s`` applies.
            max_retries: retries done by the ``openai`` client itself (it honours ``Retry-After``).
            extra_body: fields added to every request body (``chat_template_kwargs``, ...).
            provider: OpenRouter routing (``only``, ``quantizations``, ``allow_fallbacks``,
                ``require_parameters``), sent as the body's ``provider`` object.
            profile: the profile this backend came from, named in error messages.
            tool_format: the model family's tool prompt format for ``parse="client"`` (``hermes``,
                ``hermes_list``, ``json``, ``pythonic``, ``gemma_tool_code``), also used for grammars.
            tool_prompt: a custom renderer of the tool declarations, instead of ``tool_format``'s.
            headers: extra HTTP headers.
            http_client: an ``AsyncClient`` of the HTTP library the ``openai`` client uses (for tests).

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
        key = _NO_KEY
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
        if timeout_s <= 0 or (idle_timeout_s is not None and idle_timeout_s <= 0):
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
        default_headers = dict(headers or {})
        if dialect == "openrouter":
            default_headers.setdefault("X-OpenRouter-Title", "tooldispatch")
        self._client = openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            timeout=timeout_s,
            max_retries=max_retries,
            default_headers=default_headers or None,
            http_client=http_client,
        )
        self._errors = ErrorContext(
            base_url=self.base_url,
            dialect=dialect,
            start_hint=self._start_hint(),
            api_key_env=api_key_env,
            routing=self.provider,
            timeout_s=timeout_s,
            secret=key if api_key_env else None,
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

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Run one turn with ``stream=True`` and yield its events, ending with ``Finish``.

        ``timeout_s`` bounds the whole request, from sending it to the last event, and ``idle_timeout_s``
        the wait for each next event; a stream that ends without a finish reason was cut off.

        Raises:
            BackendUnavailable: the server cannot be reached, did not answer in time, went silent, dropped
                the connection mid-stream, or ended the stream before its end.
            RateLimited: HTTP 429; ``retry_after`` from ``Retry-After``.
            ProviderError: any other error status, an error inside the 200 stream, or an event that is not a
                chat completion chunk.
        """
        kwargs, extra = self.request_body(request, stream=True)
        normalizer = StreamNormalizer(self.dialect)
        received = False
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                chunks = await self._client.chat.completions.create(**kwargs, stream=True, extra_body=extra)
                await self._check_event_stream(chunks)
            try:
                iterator = aiter(chunks)
                while True:
                    chunk = await self._next_chunk(iterator, deadline)
                    if chunk is None:
                        break
                    received = True
                    for event in normalizer.feed(self._payload(chunk, "sent a stream event")):
                        yield event
            finally:
                await chunks.close()
        except openai.OpenAIError as exc:
            raise translate_error(exc, self._errors, mid_stream=received) from exc
        except TimeoutError:
            raise self._too_slow() from None
        events = normalizer.finish()
        last = events[-1]
        if isinstance(last, Finish) and last.reason is None:
            raise BackendUnavailable(
                f"the stream from the {self.dialect} endpoint at {self.base_url} ended without its terminator "
                "(no finish reason, no [DONE]): the answer was cut off; the server may have crashed or restarted"
            )
        for event in events:
            yield event

    async def _check_event_stream(self, chunks: Any) -> None:
        """``ProviderError`` quoting the body when a streamed request was answered with something else."""
        response = getattr(chunks, "response", None)
        if response is None:
            return
        content_type = str(response.headers.get("content-type", ""))
        media = content_type.split(";")[0].strip().lower()
        # Only the bodies error pages come as; a stream labelled oddly (text/plain) is still read as one.
        if media not in ("text/html", "application/json", "application/xhtml+xml"):
            return
        try:
            body = (await response.aread()).decode("utf-8", errors="replace")
        finally:
            await chunks.close()
        raise ProviderError(
            f"the {self.dialect} endpoint at {self.base_url} answered a streamed request with "
            f"{media} instead of an event stream: {_quoted(body)}"
        )

    async def _next_chunk(self, iterator: AsyncIterator[Any], deadline: float) -> Any:
        """The next chunk of a stream, or None at its end, within the deadline and the idle timeout."""
        loop = asyncio.get_running_loop()
        idle = self.idle_timeout_s
        until = deadline if idle is None else min(deadline, loop.time() + idle)
        try:
            async with asyncio.timeout_at(until):
                return await anext(iterator)
        except StopAsyncIteration:
            return None
        except TimeoutError:
            if idle is not None and until < deadline:
                raise BackendUnavailable(
                    f"the {self.dialect} endpoint at {self.base_url} sent no stream event for {idle:g} s; "
                    "check that it is running and not overloaded, or raise idle_timeout_s"
                ) from None
            raise
        except ValueError as exc:  # the event's data is not JSON (json.JSONDecodeError)
            doc = getattr(exc, "doc", None)
            shown = repr(doc[:200]) if isinstance(doc, str) else f"{type(exc).__name__}: {exc}"
            raise ProviderError(
                f"the {self.dialect} endpoint at {self.base_url} sent a stream event that is not a chat "
                f"completion chunk: {shown}"
            ) from None

    def _payload(self, value: Any, what: str) -> dict[str, Any]:
        """A chunk or response as a dict; ``ProviderError`` quoting it when it is not a JSON object."""
        if isinstance(value, pydantic.BaseModel):
            dumped = value.model_dump(exclude_unset=True)
            if isinstance(dumped, dict):
                return dumped
        kind = "chunk" if what.startswith("sent") else ""
        noun = f"a chat completion {kind}".rstrip()
        raise ProviderError(
            f"the {self.dialect} endpoint at {self.base_url} {what} that is not {noun}: {_quoted(value)}"
        )

    def _too_slow(self) -> BackendUnavailable:
        return BackendUnavailable(
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
        kwargs, extra = self.request_body(request, stream=False)
        try:
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.chat.completions.create(**kwargs, stream=False, extra_body=extra)
        except openai.OpenAIError as exc:
            raise translate_error(exc, self._errors) from exc
        except TimeoutError:
            raise self._too_slow() from None
        except ValueError as exc:  # a JSON content type whose body is not JSON
            doc = getattr(exc, "doc", None)
            raise ProviderError(
                f"the {self.dialect} endpoint at {self.base_url} answered with something that is not a chat "
                f"completion: {repr(doc[:200]) if isinstance(doc, str) else exc}"
            ) from None
        for event in response_events(self._payload(response, "answered with something"), self.dialect):
            yield event

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    async def __aenter__(self) -> OpenAICompatBackend:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
