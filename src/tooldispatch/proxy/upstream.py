"""The upstream behind the proxy: its backend, for requests with tools and for forwarding the rest.

Three kinds, chosen on the command line (``tooldispatch proxy``):

- a profile's server or OpenRouter (``--profile``), or any OpenAI-compatible URL (``--base-url --dialect``):
  requests with tools go through ``OpenAICompatBackend`` in the profile's parse mode (``server``: the
  upstream extracts calls and the proxy repairs and validates them; ``client``: the tools go into the
  prompt and the raw text is parsed here), and requests without tools are forwarded as they came, bytes
  in and bytes out, through the same backend's HTTP client (``OpenAICompatBackend.send``): one client and one
  error translation per upstream;
- the in-process llama.cpp backend (``--model NAME@QUANT``, or a ``llamacpp`` profile): every request goes
  through ``LlamaCppBackend``, so the proxy is itself a local OpenAI server.

The upstream's own key (``OPENROUTER_API_KEY``) is read from the environment by the backend and put in its
client's headers; it is never part of a repr, a log line or an error message.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tooldispatch.backends.base import Backend, ChatRequest, Event
from tooldispatch.backends.http import HttpPool, UpstreamError
from tooldispatch.backends.openai_compat import OpenAICompatBackend, with_tool_prompt
from tooldispatch.backends.prefix_cache import PrefixCache
from tooldispatch.errors import ConfigError
from tooldispatch.proxy.errors import ProxyError
from tooldispatch.proxy.translate import ProxyRequest

ParseMode = Literal["server", "client"]
Mode = Literal["server", "client", "in-process"]
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_PARSE: dict[str, ParseMode] = {"vllm": "server", "openrouter": "server", "llama-server": "client"}
"""The parse mode for ``--base-url``: vLLM and OpenRouter render tools with the model's own template and
extract calls; llama-cpp-python's server extracts none, so its raw text is parsed here."""


@dataclass
class Upstream:
    """What the proxy talks to.

    Attributes:
        backend: the backend that serves requests with tools (and every request in process).
        model: the model name clients see (``/v1/models``, the ``model`` of answers).
        label: the model's name in the statistics (the manifest name when known).
        quant: the quantization label in the statistics (``Q4_K_M``, ``NVFP4``, ``served``).
        mode: ``server``, ``client`` or ``in-process``.
        http: the backend again when it is an HTTP server (``None`` in process): it answers non-streamed
            requests without streaming, and requests without tools are forwarded through its client.
        served_model: the ``model`` the upstream expects in requests.
        tool_format: the tool prompt format of client mode (for writing earlier calls back as text).
        timeout_s: bounds the whole answer of a non-streamed request and each gap of a streamed one.
        prefix_cache: the in-process model's cache of saved context states (``None`` for a server).
    """

    backend: Backend
    model: str
    label: str
    quant: str
    mode: Mode
    http: OpenAICompatBackend | None = field(default=None, repr=False)
    served_model: str | None = None
    tool_format: str = "hermes"
    timeout_s: float = 600.0
    prefix_cache: PrefixCache | None = field(default=None, repr=False)

    @property
    def engine(self) -> str:
        """The engine's name (``llama.cpp``, ``vllm``, ``openrouter``)."""
        return self.backend.capabilities.engine

    @property
    def constrained(self) -> bool:
        """Whether ``required`` and a named ``tool_choice`` can be enforced with a grammar (client mode)."""
        return self.backend.capabilities.constrained

    @property
    def base_url(self) -> str | None:
        """The HTTP upstream's API root (``None`` in process)."""
        return self.http.base_url if self.http is not None else None

    @property
    def forwards(self) -> bool:
        """Whether requests without tools are forwarded to an HTTP upstream as they came."""
        return self.http is not None

    def prepare(self, request: ProxyRequest) -> ChatRequest:
        """The backend request for this upstream's mode.

        Server mode passes ``parallel_tool_calls`` on. Client mode over HTTP writes earlier calls and tool
        results back as text in the tool format whenever the request declares tools, ``tool_choice: none``
        included (a template that knows nothing of tools cannot render them)
        and, when no grammar can enforce ``required`` or a named tool, says so in the system prompt.
        """
        chat = request.chat
        if not request.tools:
            return chat
        if self.mode == "server":
            if "parallel_tool_calls" in request.body and request.parses:
                return replace(chat, extra={**chat.extra, "parallel_tool_calls": request.parallel})
            return chat
        if self.mode != "client":
            return chat
        from tooldispatch.prompting import prepare_messages

        messages: Sequence[Mapping[str, Any]] = chat.messages
        if any(m.get("role") == "tool" or m.get("tool_calls") for m in messages):
            messages = prepare_messages(messages, (), tool_format=self.tool_format)
        if not chat.constrained and request.tool_choice not in ("auto", "none"):
            what = "a function call" if request.tool_choice == "required" else f"a call of {request.tool_choice}"
            messages = with_tool_prompt(messages, f"Answer with {what}.")
        return chat if messages is chat.messages else replace(chat, messages=messages)

    def events(self, request: ChatRequest, *, stream: bool) -> AsyncIterator[Event]:
        """The turn's events; a non-streamed client request is asked without streaming where the upstream can.

        ``timeout_s`` bounds the whole answer of a non-streamed request and the wait for each next event of a
        streamed one, for every kind of upstream alike (the backend of an HTTP upstream is built without a bound
        of its own).
        """
        events = self.backend.stream(request) if stream or self.http is None else self.http.complete(request)
        return _bounded(events, self.timeout_s, whole=not stream, where=self.base_url or "the in-process model")

    def forward_body(self, body: Mapping[str, Any], raw: bytes) -> bytes:
        """The bytes to forward: as sent, unless the ``model`` must become the upstream's."""
        if self.served_model is None or body.get("model") == self.served_model:
            return raw
        return json.dumps({**body, "model": self.served_model}).encode()

    async def aclose(self) -> None:
        """Close the HTTP connections (the in-process model stays loaded)."""
        if self.http is not None:
            await self.http.aclose()


async def _bounded(events: AsyncIterator[Event], timeout_s: float, *, whole: bool, where: str) -> AsyncIterator[Event]:
    """``events`` within ``timeout_s``: all of them (``whole``), or each after the one before.

    Raises:
        ProxyError: 504 ``upstream_timeout`` when the bound passed.
    """
    iterator = aiter(events)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline if whole else loop.time() + timeout_s):
                    event = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                what = "the whole answer" if whole else "the next event of the stream"
                raise ProxyError(
                    504,
                    f"{where} did not send {what} within {timeout_s:g} s (--timeout); check that it is not "
                    "overloaded, or raise --timeout",
                    type="timeout",
                    code="upstream_timeout",
                ) from None
            yield event
    finally:
        await iterator.aclose()  # type: ignore[attr-defined]


def _split_model(spec: str | None) -> tuple[str, str]:
    name, _, quant = (spec or "").partition("@")
    return name, quant


def from_backend(
    backend: OpenAICompatBackend,
    *,
    timeout_s: float | None = None,
    model_spec: str | None = None,
    quant: str | None = None,
    model: str | None = None,
) -> Upstream:
    """The upstream for an OpenAI-compatible backend (``timeout_s``: the proxy's bound, by default the backend's;
    ``model_spec``: the profile's ``NAME@QUANT``).

    The proxy bounds the time of every upstream alike (``Upstream.events``), so ``build_upstream`` builds the
    backend without a bound of its own (``timeout_s=None``).
    """
    name, spec_quant = _split_model(model_spec)
    return Upstream(
        backend=backend,
        model=model or backend.model,
        label=name or backend.model,
        quant=quant or spec_quant or "served",
        mode=backend.parse,
        http=backend,
        served_model=backend.model,
        tool_format=backend.tool_format,
        timeout_s=timeout_s or backend.timeout_s or DEFAULT_TIMEOUT_S,
    )


def in_process(model_spec: str, *, timeout_s: float | None = None, **settings: Any) -> Upstream:
    """The in-process llama.cpp upstream for ``NAME@QUANT`` (or a GGUF path); ``settings`` go to the backend
    (``n_ctx``)."""
    from tooldispatch.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(model_spec, **{k: v for k, v in settings.items() if v is not None})
    name, quant = _split_model(model_spec)
    return Upstream(
        backend=backend,
        model=backend.model_name,
        label=name if quant else backend.model_name,
        quant=quant or "gguf",
        mode="in-process",
        tool_format=backend.tool_format,
        timeout_s=timeout_s if timeout_s is not None else 600.0,
        prefix_cache=backend.prefix_cache,
    )


def served_models(base_url: str, *, headers: Mapping[str, str] | None = None, timeout_s: float = 5.0) -> list[str]:
    """The model ids ``GET {base_url}/models`` lists (asked through the same HTTP client as every request).

    Raises:
        ConfigError: the upstream does not answer or lists no model.
    """

    async def listed() -> Any:
        pool = HttpPool(base_url, timeout_s=timeout_s, headers=headers)
        try:
            async with asyncio.timeout(timeout_s):
                reply = await pool.send(b"GET", "/models")
                status, raw = reply.status, await reply.read()
        finally:
            await pool.aclose()
        if status != 200:
            raise UpstreamError(f"HTTP {status}")
        return json.loads(raw)

    try:
        data = asyncio.run(listed()).get("data") or []
        ids = [str(m["id"]) for m in data if isinstance(m, Mapping) and m.get("id")]
    except (UpstreamError, TimeoutError, ValueError, AttributeError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"cannot list the models of {base_url} ({type(exc).__name__}); start the upstream first, or name its "
            "model with --served-model"
        ) from exc
    if not ids:
        raise ConfigError(f"{base_url}/models lists no model; name it with --served-model")
    return ids


def build_upstream(
    *,
    profile: str | None = None,
    base_url: str | None = None,
    dialect: str | None = None,
    model: str | None = None,
    parse: ParseMode | None = None,
    served_model: str | None = None,
    upstream_key_env: str | None = None,
    quant: str | None = None,
    timeout_s: float | None = None,
    n_ctx: int | None = None,
) -> Upstream:
    """The upstream the command line names: a profile, a URL with its dialect, or an in-process model.

    With none of them, the default profile (in-process llama.cpp on the default model).

    Raises:
        ConfigError: more than one upstream named, a URL without its dialect, ``n_ctx`` for a server (whose
            window is the server's setting), or the upstream's settings are wrong (the message names the fix).
    """
    named = [x for x in (profile, base_url, model) if x]
    if len(named) > 1:
        raise ConfigError("name one upstream: --profile, --base-url with --dialect, or --model NAME@QUANT")
    if base_url is None and dialect is not None:
        raise ConfigError("--dialect goes with --base-url")
    if model:
        return in_process(model, timeout_s=timeout_s, n_ctx=n_ctx)
    if n_ctx is not None and base_url:
        raise ConfigError("--n-ctx sets the window of an in-process model; a server's is its own setting")
    if base_url:
        if dialect is None:
            raise ConfigError("--base-url needs --dialect (vllm, llama-server or openrouter)")
        url = base_url.rstrip("/")
        if served_model is None:
            key = os.environ.get(upstream_key_env or "", "")
            served_model = served_models(url, headers={"Authorization": f"Bearer {key}"} if key else None)[0]
        backend = OpenAICompatBackend(
            base_url=url,
            model=served_model,
            dialect=dialect,  # type: ignore[arg-type]  # checked by the backend, with a clear error
            parse=parse or DEFAULT_PARSE.get(dialect, "client"),
            api_key_env=upstream_key_env,
            timeout_s=None,
        )
        return from_backend(backend, timeout_s=timeout_s or DEFAULT_TIMEOUT_S, quant=quant)
    from tooldispatch.profiles import DEFAULT_PROFILE, load_profile
    from tooldispatch.profiles.factory import server_backend
    from tooldispatch.profiles.kinds import kind

    prof = load_profile(profile or DEFAULT_PROFILE)
    if kind(prof.backend).in_process:
        if prof.model is None:
            raise ConfigError(f"{prof.path}: a {prof.backend} profile needs 'model' (NAME@QUANT)")
        return in_process(
            prof.model, timeout_s=timeout_s, **{**dict(prof.llamacpp), "n_ctx": n_ctx or prof.llamacpp.get("n_ctx")}
        )
    if n_ctx is not None:
        raise ConfigError(
            f"--n-ctx sets the window of an in-process model; profile {prof.name!r} names a server, whose window "
            "is the server's setting"
        )
    overrides: dict[str, Any] = {}
    if parse is not None:
        overrides["parse"] = parse
    if served_model is not None:
        overrides["model"] = served_model
    if upstream_key_env is not None:
        overrides["api_key_env"] = upstream_key_env
    built = server_backend(prof, timeout_s=None, **overrides)
    bound = timeout_s or (prof.client.timeout_s if prof.client is not None else DEFAULT_TIMEOUT_S)
    return from_backend(built, timeout_s=bound, model_spec=prof.model, quant=quant)
