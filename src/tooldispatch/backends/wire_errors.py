"""Translate what went wrong talking to an OpenAI-compatible upstream into the project's exception tree.

=====================================  ==============================================================
what happened                          raised
=====================================  ==============================================================
connection refused, dead server        ``BackendUnavailable`` naming the URL and how to start the server
connection dropped mid-answer          ``BackendDropped`` saying the answer was cut off
no answer within ``timeout_s``         ``BackendTimeout``
401 / 403                              ``ProviderError`` saying which environment variable holds the key
402 (OpenRouter: out of credits)       ``ProviderError``, not retryable
429                                    ``RateLimited`` with ``retry_after`` from ``Retry-After``
400 over vLLM's ``--max-model-len``    ``ContextWindowExceeded`` with the window, the prompt and the budget
503                                    ``ProviderError`` naming the routing constraints when there are some
other 4xx / 5xx                        ``ProviderError`` with the status and the server's message
error inside an HTTP 200 stream        ``ProviderError`` with the error code
=====================================  ==============================================================

The API key never appears in a message: messages are built from the server's error text, and any
occurrence of the key in it is masked.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.errors import (
    BackendDropped,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    ContextWindowExceeded,
    ProviderError,
    RateLimited,
)

# vLLM's refusals of a request that does not fit ``--max-model-len`` (0.32.0, recorded in tests/fixtures/wire/vllm):
#   "This model's maximum context length is 32768 tokens. However, your prompt contains at least 32769 input
#    tokens, which exceeds this limit even without any output tokens. ..."
#   "max_tokens=40000 cannot be greater than max_model_len=32768. Please request fewer output tokens. ..."
# and the older wording "... maximum context length is 4096 tokens and your request has 200 input tokens".
_WINDOW = re.compile(r"maximum context length is (\d+) tokens|max_model_len=(\d+)")
_PROMPT = re.compile(r"(?:request has|prompt contains(?: at least)?) (\d+) input tokens")
_BUDGET = re.compile(r"max_tokens=(\d+) cannot be greater|is too large: (\d+)")


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What an error message needs to say about the backend that failed.

    Attributes:
        base_url: the server's URL.
        dialect: ``vllm``, ``llama-server`` or ``openrouter``.
        start_hint: how to start the server (a command), or how to check the route for remote APIs.
        api_key_env: the environment variable that holds the key, when there is one.
        routing: OpenRouter ``provider`` routing constraints, when set.
        timeout_s: the request timeout.
        secret: the API key, only so it can be masked; never shown.
    """

    base_url: str
    dialect: str
    start_hint: str = ""
    api_key_env: str | None = None
    routing: Mapping[str, Any] | None = None
    timeout_s: float | None = None
    secret: str | None = field(default=None, repr=False)


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``; ``None`` if absent."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _body_message(body: object) -> tuple[str, Any]:
    """Return (message, code) from an error body in OpenAI, OpenRouter or vLLM shape."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            code = inner.get("code")
            meta = inner.get("metadata")
            text = str(message) if message else json.dumps(dict(inner), default=str)[:300]
            if isinstance(meta, Mapping) and isinstance(meta.get("raw"), str):
                text = f"{text} ({meta['raw'][:200]})"
            return text, code
        return str(inner), None
    return ("" if body is None else str(body)), None


def _mask(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _status_error(status: int, headers: Mapping[str, str], body: object, ctx: ErrorContext) -> BackendError:
    message, _ = _body_message(body)
    message = _mask(message[:500], ctx.secret)
    where = f"{ctx.dialect} endpoint at {ctx.base_url}"
    if status in (401, 403):
        key = f"the key in ${ctx.api_key_env}" if ctx.api_key_env else "the API key"
        return ProviderError(
            f"the {where} rejected {key} (HTTP {status}: {message}); set a valid key and try again",
            status=status,
        )
    if status == 402:
        return ProviderError(
            f"the {where} refused the request: out of credits (HTTP 402: {message}); "
            "add credits or raise the key's limit, then try again",
            status=402,
        )
    if status == 429:
        retry_after = parse_retry_after(headers)
        wait = f"; retry after {retry_after:g} s" if retry_after is not None else ""
        return RateLimited(
            f"the {where} is rate limiting requests (HTTP 429: {message}){wait}", retry_after=retry_after
        )
    if status == 400 and (window := _WINDOW.search(message)):
        return _context_window(message, int(window.group(1) or window.group(2)), where)
    if status == 503 and ctx.routing:
        route = json.dumps(dict(ctx.routing), sort_keys=True)
        return ProviderError(
            f"no provider at {ctx.base_url} satisfies the routing constraints provider={route} "
            f"(HTTP 503: {message}); loosen 'only' or 'quantizations', or allow fallbacks",
            status=503,
        )
    return ProviderError(
        f"the {where} answered HTTP {status}: {message}",
        status=status,
        retryable=status in (408, 409, 500, 502, 503, 504),
    )


def _context_window(message: str, n_ctx: int, where: str) -> ContextWindowExceeded:
    prompt = _PROMPT.search(message)
    budget = _BUDGET.search(message)
    return ContextWindowExceeded(
        f"the {where} refused the request: it does not fit the model's {n_ctx}-token context window "
        f"(HTTP 400: {message}); shorten the conversation, lower max_tokens, or serve with a larger --max-model-len",
        prompt_tokens=int(prompt.group(1)) if prompt else 0,
        n_ctx=n_ctx,
        reserve=int(budget.group(1) or budget.group(2)) if budget else 0,
        status=400,
    )


def timed_out(ctx: ErrorContext) -> BackendTimeout:
    """The upstream did not connect or send more of its answer within the read timeout."""
    limit = f" within {ctx.timeout_s:g} s" if ctx.timeout_s else ""
    return BackendTimeout(
        f"the {ctx.dialect} endpoint at {ctx.base_url} did not answer{limit}; "
        "check that it is running and not overloaded, or raise the timeout"
    )


def unreachable(cause: BaseException, ctx: ErrorContext) -> BackendUnavailable:
    """The upstream cannot be reached (nothing of an answer arrived)."""
    detail = f" ({_mask(str(cause), ctx.secret)[:200]})"
    hint = f"; {ctx.start_hint}" if ctx.start_hint else ""
    return BackendUnavailable(f"cannot reach the {ctx.dialect} endpoint at {ctx.base_url}{detail}{hint}")


def dropped(cause: BaseException, ctx: ErrorContext) -> BackendDropped:
    """The connection broke after the upstream's answer had begun."""
    return BackendDropped(
        f"the connection to the {ctx.dialect} endpoint at {ctx.base_url} dropped in the middle of the answer "
        f"({_mask(str(cause), ctx.secret)[:200]}); the server may have crashed or restarted"
    )


def cut_off(ctx: ErrorContext) -> BackendDropped:
    """The stream ended without its terminator (no finish reason, no ``[DONE]``)."""
    return BackendDropped(
        f"the stream from the {ctx.dialect} endpoint at {ctx.base_url} ended without its terminator "
        "(no finish reason, no [DONE]): the answer was cut off; the server may have crashed or restarted"
    )


def status_error(status: int, headers: Mapping[str, str], body: bytes, ctx: ErrorContext) -> BackendError:
    """The project error for an HTTP error status (``body`` as the server sent it)."""
    return _status_error(status, headers, _json_or_text(body), ctx)


def stream_error(error: object, ctx: ErrorContext) -> ProviderError:
    """The project error for an error object inside an HTTP 200 stream."""
    message, code = _body_message(error)
    if not message:
        message = "An error occurred during streaming"
    message = _mask(message[:500], ctx.secret)
    return ProviderError(
        f"the {ctx.dialect} endpoint at {ctx.base_url} reported an error inside an HTTP 200 stream: "
        f"code {code!r}: {message}",
        status=code if isinstance(code, int) else None,
        retryable=isinstance(code, int) and code in (408, 429, 502, 503),
    )


def _json_or_text(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")
