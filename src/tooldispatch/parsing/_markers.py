"""One cheap pass that says which tool-call and reasoning markers a text contains.

Checking each marker with ``in`` costs one full scan per marker; most outputs are long argument
strings with few ``<``, ``[`` or backticks, so jumping from one lead character to the next with
``str.find`` and testing the markers only there is far cheaper. Runs in linear time.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from tooldispatch.parsing.formats import DECLARED
from tooldispatch.parsing.formats._format import JSON_START as JSON_START  # the pseudo-markers, declared there
from tooldispatch.parsing.formats._format import PSEUDO_MARKERS
from tooldispatch.parsing.formats._format import PY_LIST as PY_LIST

REASONING_MARKERS: Final[tuple[str, ...]] = (
    "<|message|>",
    "<think>",
    "</think>",
    "<seed:think>",
    "</seed:think>",
    "[THINK]",
    "[/THINK]",
)
"""The reasoning markers ``parsing.reasoning`` looks for (harmony's message start among them)."""


def _leads(markers: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The literal markers grouped by their first character, each once, in first-seen order.

    Raises:
        ValueError: a marker that starts with none of ``<``, ``[`` or a backtick (a format module's mistake: the
            one-pass scan jumps between those characters only).
    """
    out: dict[str, list[str]] = {"<": [], "[": [], "`": []}
    for marker in markers:
        if marker in PSEUDO_MARKERS:
            continue
        group = out.get(marker[:1])
        if group is None:
            raise ValueError(f"the marker {marker!r} must start with '<', '[' or '`'; declare a marker that does")
        if marker not in group:
            group.append(marker)
    return {lead: tuple(group) for lead, group in out.items()}


LEADS: Final[dict[str, tuple[str, ...]]] = _leads(
    (
        *(m for f in DECLARED for m in (*f.markers, *(f.auto_markers or ()))),
        *REASONING_MARKERS,
    )
)
"""The literal markers by lead character: every format's (``Format.markers`` and ``auto_markers``) and the
reasoning markers."""

# Linear: one bounded character class after a literal.
_BLANK: Final = re.compile(r"\s*")
_PY_LIST: Final = re.compile(r"\[[ \t]*[A-Za-z_][\w.]{0,127}[ \t]*\(")


def scan_markers(text: str) -> frozenset[str]:
    """Return the markers of ``LEADS`` found in ``text``, plus ``PY_LIST`` and ``JSON_START``."""
    found: set[str] = set()
    if len(text) < SHORT:
        # A short text: one ``in`` per marker whose lead appears is quicker than walking the leads.
        for lead, markers in LEADS.items():
            if lead in text:
                for marker in markers:
                    if marker in text:
                        found.add(marker)
        if "[" in text and _PY_LIST.search(text):
            found.add(PY_LIST)
        return for_view(frozenset(found), text)
    for lead, markers in LEADS.items():
        wanted = set(markers)
        pos = text.find(lead)
        while pos >= 0 and wanted:
            if text.startswith(markers, pos):
                for marker in markers:
                    if text.startswith(marker, pos):
                        found.add(marker)
                        wanted.discard(marker)
            elif lead == "[" and PY_LIST not in found and _PY_LIST.match(text, pos):
                found.add(PY_LIST)
            pos = text.find(lead, pos + 1)
    # The lead loop above stops once every bracket marker was seen.
    if PY_LIST not in found and "[" in text and _PY_LIST.search(text):
        found.add(PY_LIST)
    return for_view(frozenset(found), text)


def for_view(markers: frozenset[str], view: str) -> frozenset[str]:
    """Adjust markers found in a text for a same-length view of it (``JSON_START`` depends on the view)."""
    if view[:1] == "{":
        starts_json = True
    elif not view[:1].isspace():
        starts_json = False
    else:
        first = _BLANK.match(view)
        starts_json = first is not None and view.startswith("{", first.end())
    if starts_json == (JSON_START in markers):
        return markers
    return markers | {JSON_START} if starts_json else markers - {JSON_START}


# Characters that are rare in prose and in argument strings: a marker is looked for at their occurrences.
_RARE: Final = frozenset("<>[]{}|`")
_MAX_STEPS: Final = 256  # occurrences tested one by one before one plain scan decides
SHORT: Final = 1536
"""Below this many characters a plain scan (``in``, ``str.find``) is quicker than the calls that avoid it."""
PLAIN_ANY: Final = 4096
"""Below this many characters one ``in`` per marker is quicker than :func:`contains_any`'s lead-character pass
(measured on the compiled build with tag-dense output, where the lead character is frequent)."""


def contains(text: str, marker: str) -> bool:
    """``marker in text``, jumping between occurrences of its first (or last) character with ``str.find``.

    ``in`` compares the whole text against the marker, which costs about 1 µs per KB for short markers
    made of common letters (``<|``, ``think>``); ``str.find`` of one character is a ``memchr`` scan, many
    times quicker, and such a character (``<``, ``>``, ``]``) is rare in outputs. After ``_MAX_STEPS``
    occurrences one plain scan decides, so the cost stays linear whatever the text.
    """
    if len(text) < SHORT:
        return marker in text
    if marker[0] in _RARE:
        lead, back = marker[0], 0
    elif marker[-1] in _RARE:
        lead, back = marker[-1], len(marker) - 1
    else:
        return marker in text
    find, startswith = text.find, text.startswith
    pos = find(lead, back)
    steps = 0
    while pos >= 0:
        if startswith(marker, pos - back):
            return True
        steps += 1
        if steps == _MAX_STEPS:
            return marker in text
        pos = find(lead, pos + 1)
    return False


def contains_any(text: str, markers: tuple[str, ...]) -> bool:
    """``any(marker in text for marker in markers)`` in one pass per rare character the markers share.

    Markers that start (or end) with the same rare character at the same offset are tested together at
    each occurrence of it (``<|``, ``<｜`` and ``<arg_key>`` at each ``<``): on long texts where that
    character is rare this is several times quicker than one ``in`` per marker; below :data:`PLAIN_ANY`
    characters the plain ``in`` wins.
    """
    if len(text) < PLAIN_ANY:
        for marker in markers:  # noqa: SIM110 - a loop, not any() over a generator: this runs per parse
            if marker in text:
                return True
        return False
    groups, plain = _lead_groups(markers)
    find, startswith = text.find, text.startswith
    for lead, back, group in groups:
        pos = find(lead, back)
        steps = 0
        while pos >= 0:
            if startswith(group, pos - back):
                return True
            steps += 1
            if steps == _MAX_STEPS:
                if any(marker in text for marker in group):
                    return True
                break
            pos = find(lead, pos + 1)
    return any(marker in text for marker in plain)


@functools.lru_cache(maxsize=64)
def _lead_groups(markers: tuple[str, ...]) -> tuple[tuple[tuple[str, int, tuple[str, ...]], ...], tuple[str, ...]]:
    """The markers grouped by (rare character, its offset in the marker), and those with no rare end."""
    groups: dict[tuple[str, int], list[str]] = {}
    plain: list[str] = []
    for marker in markers:
        if marker and marker[0] in _RARE:
            groups.setdefault((marker[0], 0), []).append(marker)
        elif marker and marker[-1] in _RARE:
            groups.setdefault((marker[-1], len(marker) - 1), []).append(marker)
        else:
            plain.append(marker)
    return tuple((lead, back, tuple(group)) for (lead, back), group in groups.items()), tuple(plain)


def find(text: str, marker: str, start: int = 0, end: int | None = None) -> int:
    """``text.find(marker, start, end)``, jumping between occurrences of the marker's first character.

    As quick as :func:`contains` for a marker that starts with a rare character (``<tool_call>``); the same
    bound on the occurrences tested one by one keeps it linear.
    """
    stop = len(text) if end is None else end
    if marker[0] not in _RARE or stop - start < SHORT:
        return text.find(marker, start, stop)
    lead = marker[0]
    seek, startswith = text.find, text.startswith
    pos = seek(lead, start, stop)
    steps = 0
    while pos >= 0:
        if startswith(marker, pos, stop):
            return pos
        steps += 1
        if steps == _MAX_STEPS:
            return seek(marker, pos, stop)
        pos = seek(lead, pos + 1, stop)
    return -1
