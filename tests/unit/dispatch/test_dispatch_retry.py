"""The retry decision table, row by row."""

from __future__ import annotations

import socket

import pytest

from tooldispatch.dispatch.retry import RetryDecision, decide, phase_of
from tooldispatch.errors import ToolError, ToolTimeout


def half() -> float:
    return 0.5


@pytest.mark.parametrize(
    ("read_only", "phase", "error", "attempt", "expected"),
    [
        # read-only: retried in every phase, with backoff and jitter
        (True, "before", ConnectionRefusedError(), 1, RetryDecision(True, 0.05, "read-only tool: backoff with jitter")),
        (True, "during", RuntimeError("x"), 1, RetryDecision(True, 0.05, "read-only tool: backoff with jitter")),
        (True, "during", ToolTimeout("t"), 1, RetryDecision(True, 0.05, "read-only tool: backoff with jitter")),
        (True, "after", RuntimeError("x"), 1, RetryDecision(True, 0.05, "read-only tool: backoff with jitter")),
        # side-effecting (declared False, or undeclared None): only failures before execution
        (
            False,
            "before",
            ConnectionRefusedError(),
            1,
            RetryDecision(True, 0.05, "failed before execution: backoff with jitter"),
        ),
        (
            None,
            "before",
            socket.gaierror(),
            1,
            RetryDecision(True, 0.05, "failed before execution: backoff with jitter"),
        ),
        (
            False,
            "during",
            RuntimeError("x"),
            1,
            RetryDecision(False, 0.0, "side-effecting tool failed during execution; the outcome is unknown"),
        ),
        (
            None,
            "during",
            ToolTimeout("t"),
            1,
            RetryDecision(False, 0.0, "side-effecting tool failed during execution; the outcome is unknown"),
        ),
        (
            False,
            "during",
            ToolError("flaky", retryable=True),
            1,
            RetryDecision(False, 0.0, "side-effecting tool failed during execution; the outcome is unknown"),
        ),
        (
            False,
            "after",
            RuntimeError("x"),
            1,
            RetryDecision(False, 0.0, "side-effecting tool failed after execution; the outcome is unknown"),
        ),
        # permanent errors: never, whatever the tool
        (True, "during", ToolError("bad", status=400), 1, RetryDecision(False, 0.0, "permanent error (status 400)")),
        (True, "during", ToolError("auth", status=401), 1, RetryDecision(False, 0.0, "permanent error (status 401)")),
        (
            True,
            "during",
            ToolError("forbidden", status=403),
            1,
            RetryDecision(False, 0.0, "permanent error (status 403)"),
        ),
        (
            True,
            "during",
            ToolError("missing", status=404),
            1,
            RetryDecision(False, 0.0, "permanent error (status 404)"),
        ),
        (
            False,
            "before",
            ToolError("invalid", status=422, before_execution=True),
            1,
            RetryDecision(False, 0.0, "permanent error (status 422)"),
        ),
        (True, "during", ToolError("no", retryable=False), 1, RetryDecision(False, 0.0, "permanent error")),
        (True, "before", None, 1, RetryDecision(False, 0.0, "validation errors are permanent")),
        # attempts exhausted
        (True, "during", RuntimeError("x"), 2, RetryDecision(False, 0.0, "no attempts left (2 of 2)")),
        (False, "before", ConnectionRefusedError(), 2, RetryDecision(False, 0.0, "no attempts left (2 of 2)")),
        # Retry-After honoured as given
        (
            True,
            "during",
            ToolError("slow down", status=429, retry_after=7.0),
            1,
            RetryDecision(True, 7.0, "retry after the delay the service asked for"),
        ),
        (
            False,
            "before",
            ToolError("busy", retry_after=2.5, before_execution=True),
            1,
            RetryDecision(True, 2.5, "retry after the delay the service asked for"),
        ),
    ],
)
def test_decision_table(
    read_only: bool | None, phase: str, error: BaseException | None, attempt: int, expected: RetryDecision
) -> None:
    """Each row of the side-effect × phase × error table gives exactly this decision (max_attempts=2)."""
    assert decide(read_only, phase, error, attempt, 2, rand=half) == expected  # type: ignore[arg-type]


def test_backoff_is_exponential_with_full_jitter_and_a_cap() -> None:
    """The jitter ceiling doubles per attempt (0.1, 0.2, 0.4 ...) and stops at max_delay_s."""
    delays = [
        decide(True, "during", RuntimeError(), n, 10, rand=lambda: 1.0, max_delay_s=0.5).delay_s for n in range(1, 6)
    ]
    assert delays == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert decide(True, "during", RuntimeError(), 3, 10, rand=lambda: 0.0).delay_s == 0.0


def test_phase_classification() -> None:
    """Connection refused, DNS failures and before_execution ToolErrors are 'before'; the rest 'during'."""
    assert phase_of(ConnectionRefusedError()) == "before"
    assert phase_of(socket.gaierror()) == "before"
    assert phase_of(ToolError("x", before_execution=True)) == "before"
    assert phase_of(ToolError("x")) == "during"
    assert phase_of(TimeoutError()) == "during"
    assert phase_of(ValueError()) == "during"
