"""XML-like call blocks (``<function=…>``, ``<invoke name="…">``) with one tag per parameter, or a JSON body."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    NextFinder,
    call_from_named_body,
    cut_in_opener,
    extend_to_wrapper,
    is_placeholder,
    make_call,
    xml_value,
)
from tooldispatch.parsing.lenient import loads_strict


@dataclass(frozen=True, slots=True)
class XmlDialect:
    """The spelling of one XML-like call format.

    Attributes:
        fmt: the format name reported on each call.
        item_prefix: the literal start of a call tag (``<function=``).
        item_open: pattern of the call tag; group 1 is the name. Matched only at a found prefix, and
            every repeat in it is bounded, so one match costs a bounded time.
        item_close: the literal closing tag.
        param_prefix: the literal start of a parameter tag.
        param_open: pattern of a parameter tag; group 1 is the key, an optional group 2 says whether the value
            is a string (``true``: its exact text) or JSON (``false``: decoded when it reads as JSON).
        param_close: the literal closing parameter tag.
        wrappers: ``(open, close)`` tags that may wrap one or more calls.
        json_body: a call with no parameter tag may hold its arguments as one JSON object instead.
    """

    fmt: str
    item_prefix: str
    item_open: re.Pattern[str]
    item_close: str
    param_prefix: str
    param_open: re.Pattern[str]
    param_close: str
    wrappers: tuple[tuple[str, str], ...]
    json_body: bool = False


def find_xml_calls(text: str, d: XmlDialect) -> list[RawCall]:
    """Find every call of dialect ``d``; each call is read on its own."""
    out: list[RawCall] = []
    pos = 0
    n = len(text)
    closes = NextFinder(text, d.item_close)
    param_closes = NextFinder(text, d.param_close)
    while True:
        start = text.find(d.item_prefix, pos)
        if start < 0:
            return out
        m = d.item_open.match(text, start)
        if m is None:
            pos = start + len(d.item_prefix)
            continue
        body_start = m.end()
        close = closes.find(body_start)
        nxt = text.find(d.item_prefix, body_start)
        if close >= 0 and (nxt < 0 or close < nxt):
            body_end, end, closed, at_end = close, close + len(d.item_close), True, False
        elif nxt >= 0:
            body_end, end, closed, at_end = nxt, nxt, False, False
        else:
            body_end, end, closed, at_end = n, n, False, True
        pos = end
        name = m.group(1).strip().strip("\"'")
        if is_placeholder(name):
            continue
        args, unclosed_param = _params(text, body_start, body_end, d, param_closes)
        fixes: tuple[str, ...] = () if closed else (FIX_UNCLOSED,)
        if unclosed_param:
            fixes = (*fixes, FIX_INCOMPLETE if at_end else FIX_UNCLOSED)
        span = (start, end)
        for open_tag, close_tag in d.wrappers:
            span = extend_to_wrapper(text, span[0], span[1], open_tag, close_tag)
        body = text[body_start:body_end]
        if d.json_body and not args and body.lstrip().startswith("{"):
            out.append(call_from_named_body(text, span, d.fmt, name, body, fixes=fixes, truncated=at_end))
            continue
        out.append(
            make_call(
                text,
                span,
                d.fmt,
                name,
                arguments=args,
                arguments_text=text[body_start:body_end],
                fixes=fixes,
                truncated=at_end,
            )
        )


def _params(text: str, pos: int, end: int, d: XmlDialect, closes: NextFinder) -> tuple[dict[str, Any], bool]:
    """Read the parameters of one call; report whether one was left unclosed."""
    args: dict[str, Any] = {}
    unclosed = False
    after_last = pos  # where the last complete parameter ended
    while True:
        p = text.find(d.param_prefix, pos, end)
        if p < 0:
            return args, unclosed or cut_in_opener(text, after_last, end, d.param_prefix)
        m = d.param_open.match(text, p, end)
        if m is None:
            pos = p + len(d.param_prefix)
            continue
        key = m.group(1).strip().strip("\"'")
        kind = m.group(2) if m.re.groups >= 2 else None
        v_start = m.end()
        close = closes.find(v_start, end)
        nxt = text.find(d.param_prefix, v_start, end)
        if close >= 0 and (nxt < 0 or close < nxt):
            args[key] = _value(text[v_start:close], kind)
            pos = after_last = close + len(d.param_close)
            continue
        unclosed = True
        v_end = nxt if nxt >= 0 else end
        args[key] = _value(text[v_start:v_end].rstrip("\n"), kind)
        if nxt < 0:
            return args, unclosed
        pos = nxt


def _value(raw: str, kind: str | None) -> Any:
    """A parameter's value: its exact text when marked a string, decoded when marked JSON and it reads as JSON."""
    if kind == "true":
        return raw
    if kind == "false":
        try:
            return loads_strict(raw.strip())
        except (ValueError, RecursionError):
            return raw.strip()
    return xml_value(raw)
