"""Split a model's reasoning from its content, keeping offsets into the original text.

Four dialects are recognised:

* ``<think>…</think>`` (Qwen3, DeepSeek-R1, most open reasoning models). When the prompt already
  opened the block (``reasoning_open=True``, llama.cpp's ``thinking_forced_open``), the text up to the
  first ``</think>`` is reasoning. A ``</think>`` with no opener before it means the same thing. An
  opener that is never closed makes the rest of the text reasoning.
* ``[THINK]…[/THINK]`` (Magistral) and ``<seed:think>…</seed:think>`` (Seed-OSS), with the same rules.
  A marker inside a closed ``<tool_call>…</tool_call>`` block is part of the call (a string argument that
  mentions it), not a reasoning boundary.
* gpt-oss harmony channels: ``<|channel|>analysis<|message|>…<|end|>`` is reasoning,
  ``<|channel|>final<|message|>…`` is content. A message addressed to a recipient
  (``to=functions.x``) is left whole in the content so that the harmony finder can read the call.

The result is a list of segments over the original text, so every later stage can report spans in
the caller's coordinates. ``content_view``/``reasoning_view`` give same-length copies of the text where
everything else is blanked out with spaces.

:class:`MarkerSplitter` is the same split while the output streams, for a backend that hands reasoning and
content over apart (``ReasoningDelta``/``ContentDelta``): it reads one family's tags, from the same table
(:data:`REASONING_TAGS`). Reasoning handed over apart reaches the parser as ``reasoning=`` (or
``StreamParser.feed_reasoning``), never put back into the text.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.parsing._markers import scan_markers
from tooldispatch.parsing.formats._common import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    NextFinder,
    ends_with_bracket,
    iter_blocks,
)
from tooldispatch.parsing.formats.harmony import recipient_before
from tooldispatch.types import Reasoning

SegmentKind = Literal["content", "reasoning", "hidden"]
Segment = tuple[int, int, SegmentKind]
_Splitter = Callable[[int, int, bool], list[Segment]]

REASONING_TAGS: Final[dict[str, str]] = {
    "<think>": "</think>",
    "[THINK]": "[/THINK]",
    "<seed:think>": "</seed:think>",
}
"""The reasoning blocks written as tags, opener to closer: the one table that :func:`split_reasoning`, the
streaming :class:`MarkerSplitter` and the stream parser's reasoning mode (``parsing._stream_tables``) read."""

_TAG_PAIRS: Final[tuple[tuple[str, str], ...]] = tuple(REASONING_TAGS.items())

_H_START: Final = "<|start|>"
_H_CHANNEL: Final = "<|channel|>"
_H_MESSAGE: Final = "<|message|>"
_H_ENDS: Final[tuple[str, ...]] = ("<|end|>", "<|call|>", "<|return|>")


@dataclass(init=False, slots=True)
class ReasoningSplit:
    """Where the reasoning and the content lie in one model output.

    Attributes:
        text: the original text.
        segments: ordered, non-overlapping ``(start, end, kind)`` covering the text; ``hidden`` marks
            markers such as ``<think>`` or harmony headers that are neither content nor reasoning.
    """

    text: str
    segments: tuple[Segment, ...]

    def __init__(self, text: str, segments: tuple[Segment, ...]) -> None:
        self.text = text
        self.segments = segments

    def spans(self, kind: SegmentKind) -> tuple[tuple[int, int], ...]:
        """Return the ``(start, end)`` offsets of every segment of one kind."""
        return tuple((s, e) for s, e, k in self.segments if k == kind)

    @property
    def reasoning(self) -> str:
        """The reasoning text, markers removed, one stripped block per line group."""
        parts = (self.text[s:e].strip() for s, e in self.spans("reasoning"))
        return "\n".join(p for p in parts if p)

    @property
    def content(self) -> str:
        """The content text (everything that is neither reasoning nor a marker), stripped."""
        return "".join(self.text[s:e] for s, e in self.spans("content")).strip()

    @property
    def has_reasoning(self) -> bool:
        """True when some non-blank reasoning was found."""
        return any(self.text[s:e].strip() for s, e in self.spans("reasoning"))

    def view(self, kind: SegmentKind) -> str:
        """Return a copy of the text with every segment not of ``kind`` replaced by spaces.

        The copy has the same length, so offsets found in it are offsets in the original text.
        """
        if len(self.segments) == 1 and self.segments[0][2] == kind:
            return self.text
        return "".join(self.text[s:e] if k == kind else " " * (e - s) for s, e, k in self.segments)


def split_reasoning(
    text: str, *, reasoning_open: bool = False, markers: frozenset[str] | None = None
) -> ReasoningSplit:
    """Split ``text`` into reasoning, content and markers.

    Args:
        text: the raw model output.
        reasoning_open: the prompt ended inside an opened reasoning block, so the output starts in it.
        markers: what ``scan_markers(text)`` returned, when the caller already has it.

    Returns:
        The segments, with offsets into ``text``.
    """
    present = scan_markers(text) if markers is None else markers
    segments: list[Segment] = [(0, len(text), "content")] if text else []
    if _H_CHANNEL in present or _H_MESSAGE in present:
        calls = _call_blocks(text)
        segments = _refine(segments, lambda s, e, first: _split_harmony(text, s, e, calls))
    for open_tag, close_tag in _TAG_PAIRS:
        if open_tag in present or close_tag in present or reasoning_open:
            segments = _refine(segments, _tag_splitter(text, open_tag, close_tag, reasoning_open))
    if reasoning_open and segments and not any(k == "reasoning" for _, _, k in segments):
        # No closer of any dialect: the whole output is still inside the opened block.
        segments = [(s, e, "reasoning" if k == "content" else k) for s, e, k in segments]
    return ReasoningSplit(text=text, segments=tuple(_merge(segments)))


def _refine(segments: list[Segment], split: _Splitter) -> list[Segment]:
    out: list[Segment] = []
    first = True
    for s, e, kind in segments:
        if kind == "content":
            out.extend(split(s, e, first and s == 0))
        else:
            out.append((s, e, kind))
        first = False
    return out


def _tag_splitter(text: str, open_tag: str, close_tag: str, reasoning_open: bool) -> _Splitter:
    calls = _call_blocks(text)
    find: Callable[[str, int, int], int] = functools.partial(_find_outside, text, spans=calls) if calls else text.find

    def split(start: int, end: int, first: bool) -> list[Segment]:
        return _split_tags(text, start, end, open_tag, close_tag, first and reasoning_open, find)

    return split


def _call_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of closed ``<tool_call>…</tool_call>`` blocks, whose contents hold no reasoning marker.

    Blocks are read as the hermes reader reads them (:func:`iter_blocks`): one whose closer comes after
    the next opener is not closed (unless that opener is inside its JSON), so its text can hold a
    reasoning boundary. Blocks with one JSON body each, the usual case, are found with ``str.find`` alone.
    """
    spans: list[tuple[int, int]] = []
    begin = text.find(TOOL_CALL_OPEN)
    while begin >= 0:
        body = begin + len(TOOL_CALL_OPEN)
        close = text.find(TOOL_CALL_CLOSE, body)
        if close < 0:
            break
        if text.find(TOOL_CALL_OPEN, body, close) >= 0 or not ends_with_bracket(text, body, close):
            return [(b.start, b.end) for b in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE) if b.closed]
        spans.append((begin, close + len(TOOL_CALL_CLOSE)))
        begin = text.find(TOOL_CALL_OPEN, close + len(TOOL_CALL_CLOSE))
    return spans


def _find_outside(text: str, tag: str, pos: int, end: int, spans: list[tuple[int, int]]) -> int:
    """``text.find(tag, pos, end)``, skipping occurrences inside ``spans`` (sorted, non-overlapping)."""
    i = bisect.bisect_right(spans, (pos, len(text) + 1)) - 1
    while True:
        found = text.find(tag, pos, end)
        if found < 0:
            return -1
        while i + 1 < len(spans) and spans[i + 1][0] <= found:
            i += 1
        if i >= 0 and spans[i][0] <= found < spans[i][1]:
            pos = spans[i][1]
            continue
        return found


def _split_tags(
    text: str, start: int, end: int, open_tag: str, close_tag: str, opened: bool, find: Callable[[str, int, int], int]
) -> list[Segment]:
    out: list[Segment] = []
    pos = start
    first_close = find(close_tag, pos, end)
    first_open = find(open_tag, pos, end)
    if opened and first_close < 0 and first_open < 0:
        # Another dialect may close the opened block; leave the decision to the caller.
        return [(start, end, "content")]
    if first_close >= 0 and (opened or first_open < 0 or first_close < first_open):
        lead = find(open_tag, pos, first_close)
        if lead >= 0 and not text[pos:lead].strip():
            out.append((pos, lead, "content"))
            out.append((lead, lead + len(open_tag), "hidden"))
            pos = lead + len(open_tag)
        out.append((pos, first_close, "reasoning"))
        out.append((first_close, first_close + len(close_tag), "hidden"))
        pos = first_close + len(close_tag)
    while pos < end:
        o = find(open_tag, pos, end)
        if o < 0:
            out.append((pos, end, "content"))
            break
        out.append((pos, o, "content"))
        body = o + len(open_tag)
        out.append((o, body, "hidden"))
        c = find(close_tag, body, end)
        if c < 0:
            out.append((body, end, "reasoning"))
            break
        out.append((body, c, "reasoning"))
        out.append((c, c + len(close_tag), "hidden"))
        pos = c + len(close_tag)
    return out


def _split_harmony(text: str, start: int, end: int, calls: list[tuple[int, int]]) -> list[Segment]:
    """Split one region into harmony messages.

    A message is an optional ``<|start|>role`` header, ``<|channel|>name`` with optional recipient and
    ``<|constrain|>``, then ``<|message|>`` and a body up to an end token, the next ``<|start|>`` or
    ``<|channel|>``, or the end of the text. Tokens inside the closed ``<tool_call>`` blocks ``calls``
    are text of the call.
    """
    out: list[Segment] = []
    starts, channels, messages = (_token_finder(text, token, calls) for token in (_H_START, _H_CHANNEL, _H_MESSAGE))
    enders = [(_token_finder(text, token, calls), len(token)) for token in _H_ENDS]

    def next_header(pos: int) -> int:
        found = [i for i in (starts(pos, end), channels(pos, end)) if i >= 0]
        return min(found) if found else -1

    pos = start
    while pos < end:
        head = next_header(pos)
        if head < 0:
            out.append((pos, end, "content"))
            break
        out.append((pos, head, "content"))
        msg = messages(head, end)
        if msg < 0:
            # A header with no body: a cut-off output or a stray marker.
            out.append((head, end, _header_kind(text[head:end])))
            break
        body_start = msg + len(_H_MESSAGE)
        nxt = next_header(body_start)
        limit = end if nxt < 0 else nxt
        body_end, close_end = limit, limit
        for finder, size in enders:
            i = finder(body_start, limit)
            if 0 <= i < body_end:
                body_end, close_end = i, i + size
        header = text[head:msg]
        if "to=" in header or recipient_before(text, pos, head) >= 0:
            out.append((head, close_end, "content"))
        else:
            channel = _channel_name(header)
            out.append((head, body_start, "hidden"))
            out.append((body_start, body_end, "reasoning" if channel == "analysis" else "content"))
            out.append((body_end, close_end, "hidden"))
        pos = close_end
    return out


def _token_finder(text: str, token: str, calls: list[tuple[int, int]]) -> Callable[[int, int], int]:
    """``find(pos, end)`` for ``token`` in ``text``, skipping the spans ``calls``."""
    if not calls:
        return NextFinder(text, token).find
    return functools.partial(_find_outside, text, token, spans=calls)


def _header_kind(header: str) -> SegmentKind:
    return "content" if "to=" in header else "hidden"


def _channel_name(header: str) -> str:
    i = header.find(_H_CHANNEL)
    if i < 0:
        return ""
    rest = header[i + len(_H_CHANNEL) :].strip()
    return rest.split(None, 1)[0].split("<", 1)[0] if rest else ""


def _merge(segments: Iterable[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for s, e, k in segments:
        if e <= s:
            continue
        if out and out[-1][2] == k and out[-1][1] == s:
            out[-1] = (out[-1][0], e, k)
        else:
            out.append((s, e, k))
    return out


class MarkerSplitter:
    """Split streamed text into reasoning and content at one family's reasoning tags.

    Only a block that opens the output counts as reasoning (or the whole start, when the template already
    opened it). Markers split across deltas are held back until they can be decided.

    Args:
        markers: the family's reasoning tags (``[reasoning] open/close/starts_open`` of its manifest), a pair
            of :data:`REASONING_TAGS`.

    Raises:
        ConfigError: the tags are not a pair the parser reads.
    """

    def __init__(self, markers: Reasoning) -> None:
        if REASONING_TAGS.get(markers.open) != markers.close:
            known = ", ".join(f"{o}…{c}" for o, c in _TAG_PAIRS)
            raise ConfigError(
                f"reasoning markers {markers.open}…{markers.close} are not ones the parser reads; "
                f"set [reasoning] open/close to one of {known}"
            )
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
