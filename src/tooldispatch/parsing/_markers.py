"""One cheap pass that says which tool-call and reasoning markers a text contains.

Checking each marker with ``in`` costs one full scan per marker; most outputs are long argument
strings with few ``<``, ``[`` or backticks, so jumping from one lead character to the next with
``str.find`` and testing the markers only there is far cheaper. Runs in linear time.
"""

from __future__ import annotations

import re

LEADS: dict[str, tuple[str, ...]] = {
    "<": (
        "<tool_call>",
        "<function=",
        "<invoke",
        "<|python_start|>",
        "<|python_tag|>",
        "<|channel|>",
        "<|message|>",
        "<|start|>",
        "<think>",
        "</think>",
        "<|tool",
        "<｜tool",
    ),
    "[": ("[TOOL_CALLS]", "[THINK]", "[/THINK]"),
    "`": ("```tool_code", "```tool_call"),
}

PY_LIST = "[call("
"""Pseudo-marker: a ``[name(`` list start, as in ``[get_weather(city="Paris")]``."""
JSON_START = "{start"
"""Pseudo-marker: the text's first non-blank character is ``{``."""

# Linear: one bounded character class after a literal.
_BLANK = re.compile(r"\s*")
_PY_LIST = re.compile(r"\[[ \t]*[A-Za-z_][\w.]{0,127}[ \t]*\(")


def scan_markers(text: str) -> frozenset[str]:
    """Return the markers of ``LEADS`` found in ``text``, plus ``PY_LIST`` and ``JSON_START``."""
    found: set[str] = set()
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
    first = _BLANK.match(view)
    starts_json = first is not None and view.startswith("{", first.end())
    if starts_json == (JSON_START in markers):
        return markers
    return markers | {JSON_START} if starts_json else markers - {JSON_START}
