"""What a dispatch returns, and the JSON error envelope the model sees."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.dispatch.trace import DispatchTrace

Status = Literal["ok", "error", "rejected", "awaiting_approval"]


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """The outcome of one call.

    Attributes:
        status: ``ok``, ``error`` (the tool failed or timed out), ``rejected`` (refused before running:
            unknown tool, validation, quota, stale state, idempotency conflict, denied approval) or
            ``awaiting_approval``.
        reason: why, when not a plain success (``None`` for a fresh ``ok``).
        content: the JSON string the model sees: the bounded result or the error envelope.
        trace: the call's trace.
        value: the tool's return value (``ok`` only; ``None`` for replays, which return stored content).
        approval_id: set when the call waits for approval.
    """

    status: Status
    reason: str | None
    content: str
    trace: DispatchTrace
    value: Any = None
    approval_id: str | None = None

    @property
    def ok(self) -> bool:
        """True when the tool ran (or was replayed) successfully."""
        return self.status == "ok"

    def tool_message(self) -> dict[str, Any]:
        """The OpenAI ``tool`` chat message carrying ``content``."""
        return {"role": "tool", "tool_call_id": self.trace.call_id or self.trace.id, "content": self.content}


def error_envelope(
    reason: str,
    tool: str,
    message: str,
    *,
    recoverable: bool,
    attempts: int = 0,
    retried: bool = False,
    suggestion: str | None = None,
) -> str:
    """The model-visible error: ``{error, tool, message, recoverable, attempts, retried, suggestion}``."""
    return json.dumps(
        {
            "error": reason,
            "tool": tool,
            "message": message,
            "recoverable": recoverable,
            "attempts": attempts,
            "retried": retried,
            "suggestion": suggestion,
        },
        ensure_ascii=False,
    )
