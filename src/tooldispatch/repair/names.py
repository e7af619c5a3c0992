"""Matching a written token (tool name, argument key, enum value) against the declared ones.

Three steps, each allowed by a repair level: exact; normalized (case, separators and whitespace
ignored: ``GetWeather``, ``get-weather`` and ``get weather`` all read as ``get_weather``); and, at the
``bounded`` level, the unique nearest declared token within a Levenshtein distance of 2 of the
normalized forms. A step only succeeds when its answer is unique: a tie is never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Repair, RepairLevel

MAX_DISTANCE: Final = 2
"""The largest edit distance a ``bounded`` repair may bridge."""

_SEPARATORS: Final = re.compile(r"[\s_\-.]+")


def canonical(token: str) -> str:
    """Return the normalized form of a token: separators and whitespace dropped, case folded."""
    return _SEPARATORS.sub("", token).casefold()


@dataclass(init=False, slots=True)
class Match:
    """The answer of :func:`match_token`.

    Attributes:
        value: the declared token the written one resolves to, or ``None``.
        distance: edit distance between normalized forms (0 for exact and normalized matches).
        ambiguous: when a step found several equally good declared tokens, those tokens.
        suggestion: the unique nearest declared token within the bound that the level did not allow.
    """

    value: str | None
    distance: int = 0
    ambiguous: tuple[str, ...] = ()
    suggestion: str | None = None

    def __init__(
        self, value: str | None, distance: int = 0, ambiguous: tuple[str, ...] = (), suggestion: str | None = None
    ) -> None:
        self.value = value
        self.distance = distance
        self.ambiguous = ambiguous
        self.suggestion = suggestion


def _within_bound(distance: int, target: str) -> bool:
    # A fuzzy match must keep at least half of the declared token: ``ls`` is never read as ``cd``.
    return distance <= MAX_DISTANCE and 2 * distance <= len(target)


def match_token(written: str, declared: Iterable[str], *, level: RepairLevel) -> Match:
    """Resolve a written token against the declared ones, as far as ``level`` allows.

    Args:
        written: the token as the model wrote it.
        declared: the tokens it may stand for.
        level: ``none`` (exact only), ``lossless`` (plus normalized) or ``bounded`` (plus nearest).

    Returns:
        The match; ``value`` is ``None`` when no step gave a unique answer.
    """
    choices = list(dict.fromkeys(declared))
    if written in choices:
        return Match(written)
    if level == "none" or not choices:
        return Match(None)
    wanted = canonical(written)
    normalized = {choice: canonical(choice) for choice in choices}
    same = tuple(choice for choice, norm in normalized.items() if norm == wanted)
    if len(same) == 1:
        return Match(same[0])
    if len(same) > 1:
        return Match(None, ambiguous=same)
    near = [
        (choice, int(dist))
        for _, dist, choice in process.extract(
            wanted, normalized, scorer=Levenshtein.distance, score_cutoff=MAX_DISTANCE, limit=None
        )
        if _within_bound(int(dist), normalized[choice])
    ]
    if not near:
        return Match(None)
    best = near[0][1]
    tied = tuple(choice for choice, dist in near if dist == best)
    if len(tied) > 1:
        return Match(None, best, ambiguous=tied)
    if level != "bounded":
        return Match(None, suggestion=tied[0], distance=best)
    return Match(tied[0], distance=best)


def by_nearness(written: str, declared: Iterable[str]) -> list[str]:
    """Return the declared tokens ordered nearest first (normalized edit distance, then declaration order)."""
    wanted = canonical(written)
    choices = list(dict.fromkeys(declared))
    return sorted(choices, key=lambda choice: Levenshtein.distance(wanted, canonical(choice)))


def resolve_name(
    name: str, tools: Mapping[str, ToolSpec], *, level: RepairLevel
) -> tuple[str | None, tuple[Repair, ...]]:
    """Resolve a tool name as written to a declared tool name.

    Args:
        name: the name the model wrote.
        tools: the declared tools by name.
        level: how much repair is allowed (see :data:`tooldispatch.types.RepairLevel`).

    Returns:
        The declared name (``None`` when the name cannot be resolved) and the ``name`` repair made,
        if any.
    """
    if name in tools:
        return name, ()
    if level == "none":
        return None, ()
    found = match_token(name.strip(), tools, level=level)
    if found.value is None:
        return None, ()
    return found.value, (Repair("name", "", name, found.value, found.distance),)
