"""Bound a result for the model: head + tail around a marker that says how much was cut."""

from __future__ import annotations

from dataclasses import dataclass

HEAD_SHARE = 0.4


@dataclass(frozen=True, slots=True)
class Bounded:
    """A possibly shortened text.

    Attributes:
        text: what the model sees.
        omitted: characters cut out (0 when the text fit).
    """

    text: str
    omitted: int

    @property
    def bounded(self) -> bool:
        """True when something was cut."""
        return self.omitted > 0


def marker(omitted: int, trace_id: str) -> str:
    """The marker placed where characters were cut."""
    return f"…[{omitted} characters omitted; full result: trace {trace_id}]…"


def bound(text: str, max_chars: int, trace_id: str) -> Bounded:
    """Keep ``text`` within ``max_chars``: 40 % head, the rest tail, a marker in between.

    Args:
        text: the full result.
        max_chars: the largest length returned (the marker counts).
        trace_id: where the full result is kept.
    """
    if len(text) <= max_chars:
        return Bounded(text, 0)
    # The marker's length depends on the count it states, which depends on the room the marker leaves:
    # settle the count (it changes at most once or twice, when its number of digits changes).
    omitted = len(text)
    for _ in range(4):
        room = max(max_chars - len(marker(omitted, trace_id)), 0)
        if len(text) - room == omitted:
            break
        omitted = len(text) - room
    head = int(room * HEAD_SHARE)
    tail = room - head
    return Bounded(text[:head] + marker(omitted, trace_id) + (text[-tail:] if tail else ""), omitted)
