"""The events :class:`~tooldispatch.parsing.stream.StreamParser` answers deltas with.

Reasoning text, the moment the reasoning ended, content that is safe to show, and each complete tool call.
"""

from __future__ import annotations

from dataclasses import dataclass

from tooldispatch.types import ToolCall

__all__ = ["CallReady", "ContentText", "ReasoningEnded", "ReasoningText", "StreamEvent"]


@dataclass(init=False, slots=True)
class ReasoningText:
    """Reasoning text, markers removed.

    Attributes:
        text: the new reasoning text.
    """

    text: str

    def __init__(self, text: str) -> None:
        self.text = text


@dataclass(init=False, slots=True)
class ReasoningEnded:
    """The reasoning block closed (``</think>``, ``[/THINK]``, the end of harmony's analysis message).

    Attributes:
        t: ``time.monotonic()`` when the closing marker arrived.
    """

    t: float

    def __init__(self, t: float) -> None:
        self.t = t


@dataclass(init=False, slots=True)
class ContentText:
    """Content that is safe to show: it cannot be part of a tool call.

    Attributes:
        text: the new content text.
    """

    text: str

    def __init__(self, text: str) -> None:
        self.text = text


@dataclass(init=False, slots=True)
class CallReady:
    """A complete, valid tool call.

    Attributes:
        call: the call, with the id it has in the final outcome (``call_0``, ``call_1``, ...).
    """

    call: ToolCall

    def __init__(self, call: ToolCall) -> None:
        self.call = call


StreamEvent = ReasoningText | ReasoningEnded | ContentText | CallReady
"""Every event :class:`~tooldispatch.parsing.stream.StreamParser` emits."""
