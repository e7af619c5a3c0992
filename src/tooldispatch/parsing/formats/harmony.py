"""gpt-oss harmony tool calls.

A call is a message addressed to a recipient, on the commentary channel (as documented) or on the
analysis channel (as gpt-oss also does), with the recipient before or after the channel::

    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{…}<|call|>
    <|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{…}<|call|>

Output usually starts at ``<|channel|>`` because the prompt already holds ``<|start|>assistant``; for the same
reason it may start with the recipient, before the channel::

     to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{…}<|call|>
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_UNCLOSED,
    NextFinder,
    call_from_named_body,
    is_placeholder,
    make_call,
)
from tooldispatch.parsing.formats._format import Format

FORMAT: Final = "harmony"
START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
MARKERS: Final[tuple[str, ...]] = (CHANNEL, START)
END_TOKENS: Final[tuple[str, ...]] = ("<|call|>", "<|end|>", "<|return|>")
_MAX_HEADER: Final = 512
# Linear: a literal then one bounded character class.
_RECIPIENT: Final = re.compile(r"to=([^\s<]{1,160})")
# A recipient right before a channel token, after a blank, a token's ``>`` or the text's start. Searched in a
# window of at most _BEFORE characters.
_RECIPIENT_BEFORE: Final = re.compile(r"(?<![^\s>])to=[^\s<]{1,160}\s{0,8}\Z")
_BEFORE: Final = 192


def recipient_before(text: str, lo: int, head: int) -> int:
    """Where a ``to=NAME`` written right before the channel token at ``head`` starts (not before ``lo``), else -1."""
    m = _RECIPIENT_BEFORE.search(text, max(lo, head - _BEFORE), head)
    return m.start() if m is not None else -1


def find(text: str) -> list[RawCall]:
    """Find every harmony message that has a recipient."""
    out: list[RawCall] = []
    starts = NextFinder(text, START)
    channels = NextFinder(text, CHANNEL)
    messages = NextFinder(text, MESSAGE)
    enders = [NextFinder(text, t) for t in END_TOKENS]
    n = len(text)
    pos = 0
    while pos < n:
        head = _first(starts.find(pos), channels.find(pos))
        if head < 0:
            return out
        msg = messages.find(head)
        # ``<|start|>assistant<|channel|>…`` is one header; a second ``<|start|>`` begins a new one.
        restart = starts.find(head + 1)
        if msg < 0 or (0 <= restart < msg):
            if msg < 0:
                header = text[head : min(n, head + _MAX_HEADER)]
                m = _RECIPIENT.search(header)
                if m is not None:
                    out.append(
                        make_call(
                            text,
                            (head, n),
                            FORMAT,
                            _tool_name(m.group(1)),
                            decode_error="the message never started",
                            truncated=True,
                        )
                    )
                return out
            pos = restart
            continue
        header = text[head:msg] if msg - head <= _MAX_HEADER else ""
        if "to=" not in header and text.startswith(CHANNEL, head):
            before = recipient_before(text, pos, head)
            if before >= 0:
                header, head = text[before:msg], before
        body_start = msg + len(MESSAGE)
        nxt = _first(starts.find(body_start), channels.find(body_start))
        limit = n if nxt < 0 else nxt
        body_end, close_end = limit, limit
        for finder, token in zip(enders, END_TOKENS, strict=True):
            i = finder.find(body_start, limit)
            if 0 <= i < body_end:
                body_end, close_end = i, i + len(token)
        pos = max(close_end, body_start)
        m = _RECIPIENT.search(header)
        if m is None:
            continue
        name = _tool_name(m.group(1))
        if is_placeholder(name):
            continue
        closed = close_end > body_end
        at_end = not closed and limit == n
        fixes: tuple[str, ...] = () if closed else (FIX_UNCLOSED,)
        body = text[body_start:body_end]
        out.append(call_from_named_body(text, (head, close_end), FORMAT, name, body, fixes=fixes, truncated=at_end))
    return out


def _tool_name(recipient: str) -> str:
    return recipient.removeprefix("functions.")


def _first(*positions: int) -> int:
    found = [p for p in positions if p >= 0]
    return min(found) if found else -1


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    # A header (the stream parser opens a call segment when it names a recipient, reasoning on the analysis
    # channel), and the tokens that end a message or start one with no channel: neither content nor a call.
    stream_openers=(
        ("harmony", r"(?:<\|start\|>[^<]{0,64})?<\|channel\|>(?:[^<]|<\|constrain\|>){0,256}?<\|message\|>"),
        ("harmony_junk", r"<\|start\|>[^<]{0,64}<\|message\|>|<\|end\|>|<\|return\|>|<\|call\|>"),
    ),
    stream_closers=(("harmony_call", r"<\|call\|>|<\|end\|>|<\|return\|>"),),
    other_names=("openai", "gpt_oss"),
)
"""gpt-oss harmony: messages addressed to a recipient."""
