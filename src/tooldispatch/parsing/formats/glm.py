"""GLM-4.5/4.6/4.7 tool calls: ``<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>``.

Values are text, typed later by the tool's schema (``parsing._typed_values``). What quantized GLM models also
write, each read and noted as the ``unclosed_tag`` tolerance:

- a pair with a missing opener or closer (``k</arg_key>``, ``<arg_key>k<arg_value>v``, ``</arg_key>v</arg_value>``,
  ``<arg_value>v<arg_key>…``): the tags that are there still say where the key and the value lie;
- the name glued to the first key when its ``<arg_key>`` is missing (``get_weathercity</arg_key>``): kept whole
  with the ``glued_name`` tolerance, and split at the longest declared tool name once the tools are known;
- no ``<tool_call>`` wrapper: a name right before a run of pairs (``get_weather\\n<arg_key>…``).
"""

from __future__ import annotations

import re
from typing import Any, Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import (
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    Block,
    cut_in_opener,
    is_placeholder,
    iter_blocks,
    make_call,
    tool_call_body_kind,
    xml_value,
)
from tooldispatch.parsing.formats._format import Format

FORMAT: Final = "glm"
MARKERS: Final[tuple[str, ...]] = (TOOL_CALL_OPEN,)
BARE_MARKER: Final = "<arg_key>"
"""The marker of a GLM call written without its ``<tool_call>`` wrapper."""
FIX_GLUED_NAME: Final = "glued_name"
"""The tolerance of a name glued to the first key (``get_weathercity</arg_key>``); its key is ``""`` until split."""

_KEY_OPEN, _KEY_CLOSE = "<arg_key>", "</arg_key>"
_VALUE_OPEN, _VALUE_CLOSE = "<arg_value>", "</arg_value>"
_TAGS: Final = re.compile(r"</?arg_(?:key|value)>")
# The name before an unwrapped run of pairs: a bounded identifier at the start of a line (or after a tag), then
# blanks up to the first <arg_key>.
_BARE_NAME: Final = re.compile(r"(?<![^\n>])([A-Za-z_][\w.\-]{0,127})[ \t]*\n?[ \t]*\Z")
_NAME_WINDOW: Final = 160
_EXPECT_KEY, _IN_KEY, _AFTER_KEY, _IN_VALUE = 0, 1, 2, 3


def find(text: str) -> list[RawCall]:
    """Find every GLM call: ``<tool_call>`` blocks, then runs of pairs with no wrapper."""
    out: list[RawCall] = []
    blocks: list[tuple[int, int]] = []
    for block in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE):
        blocks.append((block.start, block.end))
        if tool_call_body_kind(text, block.body_start, block.body_end) == FORMAT:
            call = read_block(text, block)
            if call is not None:
                out.append(call)
    if BARE_MARKER in text:
        out.extend(find_unwrapped(text, blocks))
        out.sort(key=lambda c: c.span)
    return out


def read_block(text: str, block: Block) -> RawCall | None:
    """Read one GLM ``<tool_call>`` block (``None`` for a placeholder name)."""
    first = _TAGS.search(text, block.body_start, block.body_end)
    head_end = block.body_end if first is None else first.start()
    head = text[block.body_start : head_end].strip()
    fixes: list[str] = [] if block.closed else [FIX_UNCLOSED]
    pending_key: str | None = None
    if first is not None and first.group() == _KEY_CLOSE:
        # The first <arg_key> is missing: the name and the first key share the head.
        parts = head.split(None, 1)
        if len(parts) == 2:
            head, pending_key = parts[0], parts[1]
        else:
            pending_key = ""
            fixes.append(FIX_GLUED_NAME)
        fixes.append(FIX_UNCLOSED)
    if not head or is_placeholder(head):
        return None
    args, cut, tolerated = read_pairs(text, head_end, block.body_end, pending_key)
    if tolerated:
        fixes.append(FIX_UNCLOSED)
    if cut:
        fixes.append(FIX_INCOMPLETE)
    return make_call(
        text,
        (block.start, block.end),
        FORMAT,
        head,
        arguments=args,
        arguments_text=text[head_end : block.body_end],
        fixes=tuple(fixes),
        truncated=block.at_end,
    )


def find_bare(text: str) -> list[RawCall]:
    """Only the GLM calls written with no ``<tool_call>`` wrapper (``auto`` reads the wrapped ones with hermes)."""
    if BARE_MARKER not in text:
        return []
    return find_unwrapped(text, [(b.start, b.end) for b in iter_blocks(text, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)])


def find_unwrapped(text: str, blocks: list[tuple[int, int]]) -> list[RawCall]:
    """Calls written as a name and a run of pairs with no ``<tool_call>`` wrapper, outside the ``blocks``."""
    out: list[RawCall] = []
    pos = text.find(_KEY_OPEN)
    while pos >= 0:
        inside = next(((s, e) for s, e in blocks if s <= pos < e), None)
        if inside is not None:
            pos = text.find(_KEY_OPEN, inside[1])
            continue
        lo = max(0, pos - _NAME_WINDOW, max((e for _, e in blocks if e <= pos), default=0))
        m = _BARE_NAME.search(text, lo, pos)
        if m is None or is_placeholder(m.group(1)):
            pos = text.find(_KEY_OPEN, pos + 1)
            continue
        limit = min((s for s, _ in blocks if s > pos), default=len(text))
        end, _ = _run_end(text, pos, limit)
        wrapped = text.startswith(TOOL_CALL_CLOSE, end)
        span_end = end + len(TOOL_CALL_CLOSE) if wrapped else end
        args, cut, _ = read_pairs(text, pos, end, None)
        fixes = (FIX_UNCLOSED,) + ((FIX_INCOMPLETE,) if cut else ())
        out.append(
            make_call(
                text,
                (m.start(1), span_end),
                FORMAT,
                m.group(1),
                arguments=args,
                arguments_text=text[pos:end],
                fixes=fixes,
                # With no closing tag, an output that ends with the run may have been cut before its next pair.
                truncated=not wrapped and _only_a_tag_start(text[end:].strip()),
            )
        )
        pos = text.find(_KEY_OPEN, span_end)
    return out


def _only_a_tag_start(rest: str) -> bool:
    """True when ``rest`` is empty or the start of a tag the run could go on with."""
    return not rest or any(tag.startswith(rest) for tag in (_KEY_OPEN, _KEY_CLOSE, _VALUE_OPEN, TOOL_CALL_CLOSE))


def _run_end(text: str, pos: int, limit: int) -> tuple[int, bool]:
    """Where a run of pairs starting at ``pos`` ends, and whether its last value was closed.

    The run stops where prose comes between a value's closer and the next tag; a last value never closed runs
    to the end of its paragraph.
    """
    end, prev = pos, ""
    for m in _TAGS.finditer(text, pos, limit):
        tag = m.group()
        if prev == _VALUE_CLOSE:
            gap = text[end : m.start()].strip()
            if gap and (tag != _KEY_CLOSE or len(gap) > 128 or "\n" in gap):
                break
        end, prev = m.end(), tag
    if prev == _VALUE_CLOSE:
        return end, True
    stop = text.find("\n\n", end, limit)
    return (limit if stop < 0 else stop), False


def read_pairs(text: str, pos: int, end: int, pending_key: str | None) -> tuple[dict[str, Any], bool, bool]:
    """Read ``<arg_key>/<arg_value>`` pairs in ``[pos, end)``, tolerating a missing opener or closer.

    ``pending_key`` is a first key read before ``pos`` whose ``<arg_key>`` was missing.

    Returns:
        The arguments, whether the last pair was cut off, and whether a tag was missing.
    """
    args: dict[str, Any] = {}
    key = pending_key
    state = _AFTER_KEY if pending_key is not None else _EXPECT_KEY
    mark = pos  # where the text of the current key or value starts
    if pending_key is not None:
        close = text.find(_KEY_CLOSE, pos, end)
        mark = close + len(_KEY_CLOSE) if close >= 0 else pos
    tolerated = False
    for m in _TAGS.finditer(text, mark, end):
        tag = m.group()
        if state == _EXPECT_KEY:
            if tag == _KEY_OPEN:
                state, mark = _IN_KEY, m.end()
            elif tag == _KEY_CLOSE:  # no opener: the key is the text since the last pair
                key, state, mark, tolerated = text[mark : m.start()].strip(), _AFTER_KEY, m.end(), True
            elif tag == _VALUE_OPEN:  # a value with no key at all: skipped
                state, key, mark, tolerated = _IN_VALUE, None, m.end(), True
            else:
                mark = m.end()
        elif state == _IN_KEY:
            key = text[mark : m.start()].strip()
            if tag == _KEY_CLOSE:
                state, mark = _AFTER_KEY, m.end()
            elif tag == _VALUE_OPEN:  # no </arg_key>
                state, mark, tolerated = _IN_VALUE, m.end(), True
            elif tag == _KEY_OPEN:  # a key with neither closer nor value
                args[key] = ""
                state, mark, tolerated = _IN_KEY, m.end(), True
            else:  # </arg_value> right after a key: the value's opener and the key's closer are missing
                state, mark, tolerated = _EXPECT_KEY, m.end(), True
        elif state == _AFTER_KEY:
            if tag == _VALUE_OPEN:
                state, mark = _IN_VALUE, m.end()
            elif tag == _VALUE_CLOSE:  # no <arg_value>: the value is the text since the key
                _put(args, key, xml_value(_strip_one(text[mark : m.start()])))
                state, mark, tolerated = _EXPECT_KEY, m.end(), True
            elif tag == _KEY_OPEN:  # a key with no value
                _put(args, key, "")
                state, mark = _IN_KEY, m.end()
            else:
                mark = m.end()
        else:  # _IN_VALUE
            if tag == _VALUE_CLOSE:
                _put(args, key, xml_value(text[mark : m.start()]))
                state, mark = _EXPECT_KEY, m.end()
            elif tag == _KEY_OPEN:  # no </arg_value>
                _put(args, key, xml_value(text[mark : m.start()].rstrip()))
                state, mark, tolerated = _IN_KEY, m.end(), True
            elif tag == _KEY_CLOSE:  # no </arg_value> and no <arg_key>: the next key follows the value's line
                value, newline, next_key = text[mark : m.start()].rstrip().rpartition("\n")
                if not newline:  # one line: all of it is the value, and the key is lost
                    value, next_key = next_key, ""
                _put(args, key, xml_value(value))
                key, state, mark, tolerated = next_key.strip(), _AFTER_KEY, m.end(), True
    if state == _IN_VALUE:
        _put(args, key, xml_value(text[mark:end]))
        return args, True, tolerated
    if state in (_IN_KEY, _AFTER_KEY):
        if key is not None and state == _AFTER_KEY:
            _put(args, key, "")
        return args, True, tolerated
    return args, cut_in_opener(text, mark, end, _KEY_OPEN), tolerated


def _put(args: dict[str, Any], key: str | None, value: Any) -> None:
    if key is not None:
        args[key] = value


def _strip_one(value: str) -> str:
    """A value written with no opener starts after the key's closer: drop the blank that separates them."""
    return value.lstrip(" \t")


def split_glued(name: str, arguments: dict[str, Any], declared: list[str]) -> tuple[str, dict[str, Any]] | None:
    """Split a name glued to the first key at the longest declared name it starts with (``None``: none does)."""
    best = max((d for d in declared if name.startswith(d) and len(name) > len(d)), key=len, default=None)
    if best is None or "" not in arguments:
        return None
    first_key = name[len(best) :]
    return best, {(first_key if k == "" else k): v for k, v in arguments.items()}


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    auto_find=find_bare,
    auto_markers=(BARE_MARKER,),
    text_values=True,
    other_names=("glm45", "glm47"),
)
"""GLM: ``<arg_key>``/``<arg_value>`` pairs. ``auto`` reads its ``<tool_call>`` blocks with hermes's (one pass over
the shared tag, each block by the format owning its body) and its pairs with no wrapper here."""
