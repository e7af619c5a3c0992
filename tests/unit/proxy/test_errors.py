"""The project's errors mapped to OpenAI-shaped answers with the right status."""

from __future__ import annotations

import json

import pytest

from tooldispatch.errors import (
    BackendTimeout,
    BackendUnavailable,
    ConfigError,
    ProviderError,
    RateLimited,
    TooldispatchError,
)
from tooldispatch.proxy.errors import ProxyError, from_backend


def test_rate_limit_is_429_with_retry_after() -> None:
    """An upstream 429 stays a 429 and carries the upstream's wait as Retry-After."""
    err = from_backend(RateLimited("slow down", retry_after=2.4))
    assert (err.status, err.type, err.headers) == (429, "rate_limit_error", {"Retry-After": "2"})


def test_unreachable_upstream_is_502_and_a_timeout_504() -> None:
    """A dead upstream is a bad gateway; one that did not answer in time is a gateway timeout."""
    assert from_backend(BackendUnavailable("cannot reach")).status == 502
    timeout = BackendTimeout("did not answer")
    err = from_backend(timeout)
    assert (err.status, err.type, err.code) == (504, "timeout", "upstream_timeout")


@pytest.mark.parametrize(
    ("status", "expected"), [(400, 400), (404, 404), (422, 422), (401, 502), (403, 502), (500, 502), (None, 502)]
)
def test_upstream_statuses(status: int | None, expected: int) -> None:
    """The client's own faults keep their status; the proxy's key and upstream failures become 502."""
    assert from_backend(ProviderError("no", status=status)).status == expected


def test_config_error_is_400_and_anything_else_500() -> None:
    """A request the backend cannot serve as configured is the client's 400; an unknown error is a 500."""
    assert from_backend(ConfigError("tool_choice names x")).status == 400
    assert from_backend(TooldispatchError("odd")).status == 500


def test_error_body_and_sse_event_have_openai_shape() -> None:
    """The body is {"error": {message, type, param, code}}; the SSE form is one data event of the same object."""
    err = ProxyError(400, "bad tools", param="tools", code="invalid_request")
    expected = {
        "error": {"message": "bad tools", "type": "invalid_request_error", "param": "tools", "code": "invalid_request"}
    }
    assert err.body() == expected
    assert err.sse().startswith(b"data: ") and err.sse().endswith(b"\n\n")
    assert json.loads(err.sse()[6:]) == expected
