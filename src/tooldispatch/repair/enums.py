"""Enum values: exact, then normalized (case, separators, whitespace), then the unique nearest.

A value that still matches nothing is left as written; validation then reports it with the list of
allowed values, plus the hint recorded here (a tie, or a near value the level did not allow).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tooldispatch.repair.names import match_token
from tooldispatch.types import RepairLevel


def _same(a: Any, b: Any) -> bool:
    # JSON equality: 1 == 1.0, but true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def in_enum(value: Any, allowed: Sequence[Any]) -> bool:
    """Return True when ``value`` equals one of ``allowed`` under JSON equality."""
    return any(_same(value, option) for option in allowed)


@dataclass(init=False, slots=True)
class EnumFix:
    """What :func:`fix_enum` decided.

    Attributes:
        value: the repaired value (``None`` with ``found=False`` when nothing fits).
        found: whether a repair was found.
        distance: the edit distance of the repair (0 for normalized matches).
        hint: a sentence for the error message when no repair was applied.
    """

    value: Any = None
    found: bool = False
    distance: int = 0
    hint: str | None = None

    def __init__(self, value: Any = None, found: bool = False, distance: int = 0, hint: str | None = None) -> None:
        self.value = value
        self.found = found
        self.distance = distance
        self.hint = hint


def fix_enum(value: Any, allowed: Sequence[Any], *, level: RepairLevel) -> EnumFix:
    """Find the allowed value a written one stands for, as far as ``level`` allows.

    Only strings are repaired: a string that spells a non-string allowed value (``"2"`` for ``2``) is
    read as it (lossless), and string values are matched by :func:`match_token`.
    """
    if level == "none" or not isinstance(value, str):
        return EnumFix()
    stripped = value.strip()
    for option in allowed:
        if not isinstance(option, str) and json.dumps(option) == stripped:
            return EnumFix(option, True)
    strings = [option for option in allowed if isinstance(option, str)]
    match = match_token(value, strings, level=level)
    if match.value is not None:
        return EnumFix(match.value, True, match.distance)
    if match.ambiguous:
        tied = ", ".join(json.dumps(option) for option in match.ambiguous)
        return EnumFix(hint=f"it is equally close to {tied}, so it was not guessed")
    if match.suggestion is not None:
        return EnumFix(hint=f"did you mean {json.dumps(match.suggestion)}? near matches are not applied to this tool")
    return EnumFix()
