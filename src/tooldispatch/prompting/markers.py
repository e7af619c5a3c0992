"""Reasoning markers in streamed output: split ``<think>…</think>`` off the visible content.

A family's markers come from its manifest (``[reasoning] open/close/starts_open``). Only a block that
opens the output counts as reasoning, or the whole start when the chat template already opened it.
"""

from __future__ import annotations

from tooldispatch.types import Reasoning


class MarkerSplitter:
    """Split streamed text into reasoning and content at ``<think>``-style markers.

    Only a block that opens the output counts as reasoning (or the whole start, when the template
    already opened it). Markers split across deltas are held back until they can be decided.

    Args:
        markers: the family's reasoning markers.
    """

    def __init__(self, markers: Reasoning) -> None:
        self._open = markers.open
        self._close = markers.close
        self._state = "reasoning" if markers.starts_open else "start"
        self._buf = ""

    def feed(self, text: str) -> list[tuple[str, str]]:
        """Take a delta; return ``(kind, text)`` pieces, kind ``reasoning``, ``end`` or ``content``."""
        self._buf += text
        out: list[tuple[str, str]] = []
        while True:
            if self._state == "start":
                stripped = self._buf.lstrip()
                if not stripped or (self._open.startswith(stripped) and stripped != self._open):
                    return out
                if stripped.startswith(self._open):
                    self._buf = stripped[len(self._open) :]
                    self._state = "reasoning"
                else:
                    self._state = "content"
            elif self._state == "reasoning":
                i = self._buf.find(self._close)
                if i >= 0:
                    if i:
                        out.append(("reasoning", self._buf[:i]))
                    out.append(("end", ""))
                    self._buf = self._buf[i + len(self._close) :]
                    self._state = "content"
                    continue
                keep = next((k for k in range(len(self._close) - 1, 0, -1) if self._buf.endswith(self._close[:k])), 0)
                ready = self._buf[: len(self._buf) - keep]
                if ready:
                    out.append(("reasoning", ready))
                self._buf = self._buf[len(ready) :]
                return out
            else:
                if self._buf:
                    out.append(("content", self._buf))
                self._buf = ""
                return out

    def flush(self) -> list[tuple[str, str]]:
        """Return what is held back at the end of the stream."""
        rest, self._buf = self._buf, ""
        if not rest:
            return []
        return [("reasoning" if self._state == "reasoning" else "content", rest)]
