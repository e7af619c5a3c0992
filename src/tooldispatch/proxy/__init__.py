"""``tooldispatch proxy``: the tolerant tool-call parser in front of any OpenAI-compatible server.

An ASGI application (Starlette on uvicorn) that answers ``/v1/chat/completions`` for any client (the
``openai`` SDK, LangChain, pydantic-ai, opencode, Codex) from an upstream: a profile's server, OpenRouter,
any OpenAI-compatible URL, or the in-process llama.cpp backend. With ``tools`` in a request, the upstream's
output goes through ``parse_tool_calls`` and the answer carries native ``tool_calls``; each call streams as
soon as it is complete. Every request's parse outcome is counted in the store.

Modules: ``translate`` (request checks, answers), ``upstream`` (what the proxy talks to), ``turn`` and
``stream`` (a turn without and with SSE), ``errors`` (OpenAI's error shape), ``stats`` (counting and rates),
``app`` (the routes), ``server`` (uvicorn's protocol with a bound on a request head's arrival), ``scripted`` (a
scripted upstream for the benchmark and tests), ``report``.
"""

from __future__ import annotations

from tooldispatch.proxy.app import Proxy, build_app
from tooldispatch.proxy.errors import ProxyError
from tooldispatch.proxy.stats import Rates, Recorder, RequestStats, rates
from tooldispatch.proxy.translate import Limits, ProxyRequest, read_request
from tooldispatch.proxy.upstream import Upstream, build_upstream

__all__ = [
    "Limits",
    "Proxy",
    "ProxyError",
    "ProxyRequest",
    "Rates",
    "Recorder",
    "RequestStats",
    "Upstream",
    "build_app",
    "build_upstream",
    "rates",
    "read_request",
]
