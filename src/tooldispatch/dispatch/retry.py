"""The retry policy, as a pure decision from (side-effect class × failure phase × error × attempt).

===================  ==============  ====================  ===================
tool                 before          during (incl. timeout) after
===================  ==============  ====================  ===================
read-only            retry           retry                 retry
side-effecting       retry           never (outcome unknown) never
===================  ==============  ====================  ===================

Before every row: permanent errors (``ToolError`` with status 400/401/403/404/422 or
``retryable=False``, and validation) are never retried, and no row retries past ``max_attempts``.
Delays are exponential with full jitter, ``uniform(0, min(max_delay, base × 2^(attempt-1)))``, unless the
error carries ``retry_after`` (a ``Retry-After`` the tool's service sent), which is honoured as given.
A failure is *before* execution when it is ``ConnectionRefusedError``, a DNS failure
(``socket.gaierror``) or a ``ToolError(before_execution=True)``: no side effect can have happened.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tooldispatch.errors import ToolError

Phase = Literal["before", "during", "after"]
PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Whether to try again, after how long, and why."""

    retry: bool
    delay_s: float
    reason: str


def phase_of(error: BaseException) -> Phase:
    """Classify where a tool's exception happened: ``before`` execution when nothing can have run."""
    if isinstance(error, ConnectionRefusedError | socket.gaierror):
        return "before"
    if isinstance(error, ToolError) and error.before_execution:
        return "before"
    return "during"


def is_permanent(error: BaseException | None) -> bool:
    """True for errors that retrying cannot fix."""
    if isinstance(error, ToolError):
        return error.retryable is False or error.status in PERMANENT_STATUSES
    return False


def decide(
    read_only: bool | None,
    phase: Phase,
    error: BaseException | None,
    attempt: int,
    max_attempts: int,
    *,
    base_delay_s: float = 0.1,
    max_delay_s: float = 5.0,
    rand: Callable[[], float] = random.random,
) -> RetryDecision:
    """Decide whether a failed attempt is tried again.

    Args:
        read_only: the tool's declared ``read_only`` (``None`` counts as side-effecting).
        phase: where the failure happened: ``before``, ``during`` (timeouts included) or ``after`` execution.
        error: the exception (a ``ToolTimeout`` for timeouts), or None for a validation failure.
        attempt: the attempt that just failed, from 1.
        max_attempts: attempts allowed in total.
        base_delay_s: first backoff ceiling.
        max_delay_s: largest backoff ceiling.
        rand: a uniform [0, 1) source for jitter.

    Returns:
        The decision; ``reason`` is a short phrase suitable for traces and the model.
    """
    if error is None:
        return RetryDecision(False, 0.0, "validation errors are permanent")
    if is_permanent(error):
        status = getattr(error, "status", None)
        return RetryDecision(False, 0.0, f"permanent error{f' (status {status})' if status else ''}")
    if attempt >= max_attempts:
        return RetryDecision(False, 0.0, f"no attempts left ({attempt} of {max_attempts})")
    if read_only is not True and phase != "before":
        return RetryDecision(False, 0.0, f"side-effecting tool failed {phase} execution; the outcome is unknown")
    retry_after = error.retry_after if isinstance(error, ToolError) else None
    if retry_after is not None and retry_after >= 0:
        return RetryDecision(True, float(retry_after), "retry after the delay the service asked for")
    ceiling = min(max_delay_s, base_delay_s * (2 ** (attempt - 1)))
    why = "read-only tool" if read_only is True else "failed before execution"
    return RetryDecision(True, rand() * ceiling, f"{why}: backoff with jitter")
