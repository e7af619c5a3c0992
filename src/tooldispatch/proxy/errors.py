"""Errors in OpenAI's shape, with the status a client expects.

Every failure the proxy answers is one JSON object, ``{"error": {"message", "type", "param", "code"}}``, the
shape the ``openai`` SDK and every agent framework read. ``ProxyError`` carries it; ``from_backend`` maps the
project's exception tree onto it at the edge:

=====================================  ======  ===========================
what failed                            status  ``type``
=====================================  ======  ===========================
the request itself (tools, bounds)     400     ``invalid_request_error``
missing or wrong proxy key             401     ``authentication_error``
body over the size bound               413     ``invalid_request_error``
upstream rate limit                    429     ``rate_limit_error`` (+ ``Retry-After``)
upstream refused the request (4xx)     same    ``invalid_request_error``
upstream unreachable, bad answer, 5xx  502     ``upstream_error``
upstream did not answer in time        504     ``timeout``
prompt over the context window         400     ``invalid_request_error`` (``context_length_exceeded``)
upstream answer broke off              502     ``upstream_error`` (``upstream_dropped``)
=====================================  ======  ===========================

An upstream 401 or 403 is the proxy's own key being wrong, not the client's, so it is a 502 whose message
names the environment variable to fix. Messages come from the project's errors, which never hold a key.
"""

from __future__ import annotations

import json
from typing import Any

from tooldispatch.errors import (
    BackendDropped,
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    ConfigError,
    ContextWindowExceeded,
    RateLimited,
    TooldispatchError,
)

# Upstream 4xx statuses that say the client's request was wrong, answered to the client as they came.
_CLIENT_STATUSES = frozenset({400, 402, 404, 409, 413, 415, 422})


class ProxyError(Exception):
    """One answer in OpenAI's error shape.

    Attributes:
        status: the HTTP status.
        message: one line saying what failed and what to do.
        type: OpenAI's error ``type``.
        code: a short machine-readable code.
        param: the request field at fault, when there is one.
        headers: extra response headers (``Retry-After``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict[str, Any]:
        """The JSON object a client receives."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def sse(self) -> bytes:
        """The error as one SSE event (for failures after a stream began; the ``openai`` SDK raises on it)."""
        return b"data: " + json.dumps(self.body()).encode() + b"\n\n"


def invalid(message: str, *, param: str | None = None, code: str = "invalid_request") -> ProxyError:
    """A 400 for a request the proxy cannot serve as sent."""
    return ProxyError(400, message, param=param, code=code)


def context_exceeded(exc: ContextWindowExceeded, *, local: bool) -> ProxyError:
    """400 ``context_length_exceeded`` (OpenAI's code, which clients do not retry) with the counts."""
    if local:
        message = (
            f"the prompt has {exc.prompt_tokens} tokens and the model's context window is {exc.n_ctx} tokens, "
            "which leaves no room for an answer; shorten the conversation, or restart the proxy with a larger --n-ctx"
        )
    else:
        message = str(exc)
    return ProxyError(400, message, code="context_length_exceeded", param="messages")


def upstream_dropped(what: str) -> ProxyError:
    """502 ``upstream_dropped``: the upstream's answer began and then broke off."""
    return ProxyError(502, what, type="upstream_error", code="upstream_dropped")


def from_backend(exc: TooldispatchError, *, local: bool = False) -> ProxyError:
    """The OpenAI-shaped answer for an error of the project's tree raised while serving a request (``local``: by
    the in-process model)."""
    message = str(exc)
    if isinstance(exc, ContextWindowExceeded):
        return context_exceeded(exc, local=local)
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": f"{max(0, round(exc.retry_after))}"} if exc.retry_after is not None else {}
        return ProxyError(429, message, type="rate_limit_error", code="rate_limited", headers=headers)
    if isinstance(exc, BackendTimeout):
        return ProxyError(504, message, type="timeout", code="upstream_timeout")
    if isinstance(exc, BackendDropped):
        return upstream_dropped(message)
    if isinstance(exc, BackendUnavailable):
        return ProxyError(502, message, type="upstream_error", code="upstream_unavailable")
    if isinstance(exc, BackendError):
        status = exc.status
        if status in _CLIENT_STATUSES:
            return ProxyError(status, message, type="invalid_request_error", code="upstream_rejected")
        return ProxyError(502, message, type="upstream_error", code="upstream_error")
    if isinstance(exc, ConfigError):
        return invalid(message)
    return ProxyError(500, message, type="server_error", code="internal_error")
