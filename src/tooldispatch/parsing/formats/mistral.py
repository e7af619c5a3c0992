"""Mistral tool calls after ``[TOOL_CALLS]``.

Before tokenizer v11 the payload is a JSON list (``[TOOL_CALLS][{"name": …, "arguments": {…}}]``);
from v11 it is ``name[ARGS]{…}`` (older builds: ``name{…}``), with an optional ``[CALL_ID]id`` (Mistral Small
3.2, Magistral), and ``[TOOL_CALLS]`` repeated before each call. Served without special tokens, the leading
``[TOOL_CALLS]`` can be missing: ``name[ARGS]{…}`` alone, with prose after it, is read too.
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_UNCLOSED,
    balanced_end,
    call_from_json_text,
    decode_json,
    is_placeholder,
    make_call,
    match_name,
    raw_decode_at,
    skip_ws,
    split_call_object,
)
from tooldispatch.parsing.formats._format import Format

FORMAT: Final = "mistral"
TOKEN: Final = "[TOOL_CALLS]"
_ARGS: Final = "[ARGS]"
_CALL_ID: Final = "[CALL_ID]"
MARKERS: Final[tuple[str, ...]] = (TOKEN, _ARGS)
# The name (and call id) right before an ``[ARGS]`` with no ``[TOOL_CALLS]`` in front. Bounded.
_NAME_BEFORE_ARGS: Final = re.compile(
    r"([A-Za-z_][\w.\-]{0,127})[ \t]{0,4}(?:\[CALL_ID\][ \t]{0,4}[\w\-]{1,64}[ \t]{0,4})?\Z"
)


def find(text: str) -> list[RawCall]:
    """Find every call introduced by ``[TOOL_CALLS]``, and every ``name[ARGS]{…}`` outside them."""
    out = _after_tokens(text)
    if _ARGS in text:
        out = sorted([*out, *_bare_args(text, [c.span for c in out])], key=lambda c: c.span)
    return out


def _bare_args(text: str, taken: list[tuple[int, int]]) -> list[RawCall]:
    """``name[ARGS]{…}`` (or ``name[CALL_ID]id[ARGS]{…}``) with no ``[TOOL_CALLS]`` before it."""
    out: list[RawCall] = []
    a = text.find(_ARGS)
    while a >= 0:
        if not any(s <= a < e for s, e in taken):
            named = _NAME_BEFORE_ARGS.search(text, max(0, a - 220), a)
            if named is not None and (named.start() == 0 or not text[named.start() - 1].isalnum()):
                calls, _ = _named_payload(text, named.start(), named.start(), len(text))
                out.extend(c for c in calls if not is_placeholder(c.name))
        a = text.find(_ARGS, a + len(_ARGS))
    return out


def _after_tokens(text: str) -> list[RawCall]:
    out: list[RawCall] = []
    pos = 0
    while True:
        t = text.find(TOKEN, pos)
        if t < 0:
            return out
        p = skip_ws(text, t + len(TOKEN))
        nxt = text.find(TOKEN, t + len(TOKEN))
        region = nxt if nxt >= 0 else len(text)
        if text.startswith(("[", "{"), p):
            calls, pos = _json_payload(text, t, p, region)
        else:
            calls, pos = _named_payload(text, t, p, region)
        out.extend(c for c in calls if not is_placeholder(c.name))
        pos = max(pos, t + len(TOKEN))


def _json_payload(text: str, token: int, p: int, region: int) -> tuple[list[RawCall], int]:
    """Read a JSON list (or one object) of calls, element by element, so one bad element stays alone."""
    if text.startswith("{", p):
        end = balanced_end(text, p, limit=region)
        stop = region if end < 0 else end
        cut = end < 0 and region == len(text)
        return [call_from_json_text(text, (token, stop), FORMAT, text[p:stop], truncated=cut)], stop
    whole = raw_decode_at(text, p, region)  # a valid list's end, without the bracket scan when the text is short
    list_end = whole[1] if whole is not None else balanced_end(text, p, limit=region)
    limit = region if list_end < 0 else list_end
    out: list[RawCall] = []
    i = skip_ws(text, p + 1, limit)
    while i < limit and text[i] != "]":
        start = token if not out else out[-1].span[1]
        done = raw_decode_at(text, i, limit)
        if done is not None and done[1] <= limit:
            value, e = done
            name, args, fixes, error = split_call_object(value)
            out.append(
                make_call(
                    text,
                    (start, e),
                    FORMAT,
                    name,
                    arguments=args,
                    arguments_text=text[i:e],
                    decode_error=error,
                    fixes=fixes,
                )
            )
        else:
            bracket = text.startswith("{", i)
            e = balanced_end(text, i, limit=limit) if bracket else -1
            cut = e < 0
            e = limit if cut else e
            out.append(
                call_from_json_text(
                    text,
                    (start, e),
                    FORMAT,
                    text[i:e],
                    truncated=cut and list_end < 0 and region == len(text),
                    # An object that did not decode whole, or never closed, is not strict JSON either way.
                    strict_failed=bracket,
                )
            )
        i = skip_ws(text, e, limit)
        if i < limit and text[i] == ",":
            i = skip_ws(text, i + 1, limit)
        elif i < limit and text[i] != "]":
            break
    if out and list_end >= 0:
        last = out[-1]
        out[-1] = make_call(
            text,
            (last.span[0], list_end),
            FORMAT,
            last.name,
            arguments=last.arguments,
            arguments_text=last.arguments_text,
            decode_error=last.decode_error,
            fixes=last.lenient,
            truncated=last.truncated,
        )
    if not out and list_end < 0:
        decoded = decode_json(text[p:region])
        if decoded.error is not None:
            out.append(
                make_call(
                    text,
                    (token, region),
                    FORMAT,
                    None,
                    arguments_text=text[p:region],
                    decode_error=decoded.error,
                    truncated=region == len(text),
                )
            )
    return out, limit


def _named_payload(text: str, token: int, p: int, region: int) -> tuple[list[RawCall], int]:
    """Read ``name[CALL_ID]id[ARGS]{…}`` / ``name{…}``."""
    name = match_name(text, p)
    if name is None:
        return [], p
    i = p + len(name)
    for marker in (_CALL_ID, _ARGS, _CALL_ID):
        i = skip_ws(text, i)
        if text.startswith(marker, i):
            i += len(marker)
            if marker == _CALL_ID:
                ident = match_name(text, skip_ws(text, i))
                i = skip_ws(text, i) + (len(ident) if ident else 0)
    i = skip_ws(text, i)
    if not text.startswith("{", i):
        if i >= region:
            return [
                make_call(text, (token, region), FORMAT, name, decode_error="no arguments", truncated=i >= len(text))
            ], i
        return [], i
    end = balanced_end(text, i, limit=region)
    cut = end < 0
    stop = region if cut else end
    at_end = cut and region == len(text)
    decoded = decode_json(text[i:stop])
    if decoded.error is not None:
        call = make_call(
            text, (token, stop), FORMAT, name, arguments_text=text[i:stop], decode_error=decoded.error, truncated=at_end
        )
    else:
        call = make_call(
            text,
            (token, stop),
            FORMAT,
            name,
            arguments=decoded.value,
            arguments_text=text[i:stop],
            fixes=decoded.fixes + ((FIX_UNCLOSED,) if cut and decoded.complete else ()),
            truncated=at_end,
        )
    return [call], stop


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    stream_openers=(("open_ended", r"\[TOOL_CALLS\]"),),
)
"""Mistral: calls after ``[TOOL_CALLS]`` (a segment the stream parser holds to the end of the output)."""
