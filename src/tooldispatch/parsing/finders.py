"""The strict stage: run the finders a text's markers select, and keep their non-overlapping finds.

The finders and the marker table are declared by the format modules (``parsing.formats``); this module sits
above both, so that the marker table can be built from the declarations.
"""

from __future__ import annotations

from tooldispatch.errors import ConfigError
from tooldispatch.parsing._markers import scan_markers
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import _AUTO, _AUTO_BY_MARKER, FORMATS, OTHER_NAMES
from tooldispatch.parsing.formats._common import is_schema_echo
from tooldispatch.parsing.formats._format import Format


def select_formats(text: str, tool_format: str, markers: frozenset[str] | None = None) -> list[Format]:
    """Return the finders to run: those whose markers appear (``auto``) or the one named.

    Raises:
        ConfigError: ``tool_format`` is neither ``auto``, a known format nor one of :data:`OTHER_NAMES`.
    """
    if tool_format == "auto":
        if markers is None:
            markers = scan_markers(text)
        # Usually one or two markers are present: look up their formats rather than test every format.
        ranks: set[int] = set()
        for marker in markers:
            ranks.update(_AUTO_BY_MARKER.get(marker, ()))
        return [_AUTO[rank] for rank in sorted(ranks)]
    named = FORMATS.get(tool_format)
    if named is not None:
        return [named]
    other = OTHER_NAMES.get(tool_format)
    if other is not None:
        return list(other)
    known = ", ".join(["auto", *FORMATS, *OTHER_NAMES])
    raise ConfigError(f"unknown tool_format {tool_format!r}; use one of: {known}")


def find_strict(text: str, tool_format: str = "auto", markers: frozenset[str] | None = None) -> list[RawCall]:
    """Run the selected finders and keep non-overlapping finds, in text order.

    Echoed tool declarations (arguments that are a JSON Schema) are dropped. Where two formats claim
    overlapping text, the find that starts first (then the longer one, then the
    format listed first in ``FORMATS``) wins; finds of one format never conflict with each other. One
    exception keeps a bad block from dropping good ones: a call cut off at the end of the text whose
    arguments could not be read (``[f(`` never closed) yields to readable calls of other formats inside it.
    """
    selected = select_formats(text, tool_format, markers)
    if not selected:
        return []
    found: list[tuple[int, int, int, RawCall]] = []
    for rank, fmt in enumerate(selected):
        try:
            calls = fmt.find(text)
        except (RecursionError, TimeoutError):
            # Pathological input (thousands of nested brackets, a regex past its time bound): no find.
            continue
        found.extend((c.span[0], -c.span[1], rank, c) for c in calls if not is_schema_echo(c.arguments))
    if len(selected) == 1:
        # One finder: its finds are already in text order and never conflict.
        return [t[3] for t in found]
    found = _without_broken_cutoffs(found)
    found.sort(key=lambda t: (t[0], t[1], t[2]))
    kept: list[RawCall] = []
    owner: tuple[int, tuple[int, int]] | None = None
    last_end = -1
    for start, neg_end, rank, call in found:
        end = -neg_end
        if start >= last_end:
            kept.append(call)
            owner = (rank, call.span)
            last_end = end
        elif owner is not None and owner[0] == rank:
            kept.append(call)
            last_end = max(last_end, end)
    return kept


_Find = tuple[int, int, int, RawCall]


def _without_broken_cutoffs(found: list[_Find]) -> list[_Find]:
    """Drop each unreadable call cut off at the end that holds a readable call of another format."""
    broken = [t for t in found if t[3].truncated and t[3].decode_error is not None]
    if not broken:
        return found
    readable = [t for t in found if t[3].decode_error is None]
    dropped: set[int] = set()
    for start, neg_end, rank, call in broken:
        end = -neg_end
        if any(start <= s and -e <= end and r != rank for s, e, r, _ in readable):
            dropped.add(id(call))
    return [t for t in found if id(t[3]) not in dropped] if dropped else found
