"""Retry-After parsing for RateLimited."""

from __future__ import annotations

from tooldispatch.backends.wire_errors import parse_retry_after


def test_retry_after_seconds() -> None:
    """A number of seconds is read as is."""
    assert parse_retry_after({"Retry-After": "7"}) == 7.0


def test_retry_after_http_date() -> None:
    """An HTTP date is turned into seconds from now."""
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=1445412500.0) == 10.0


def test_retry_after_ms_wins() -> None:
    """``retry-after-ms`` is preferred and converted to seconds."""
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5


def test_retry_after_absent_or_garbage() -> None:
    """No header, or one that is neither a number nor a date, gives None."""
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
