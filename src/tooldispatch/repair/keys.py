"""Argument keys: an unknown key is renamed to the declared property it stands for.

A key is only renamed when the declared property is not already present and no other key claimed it,
and when the match is unique at the allowed level. Keys matching ``patternProperties`` are left alone,
and so are keys that match nothing (validation decides whether they are allowed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.repair.names import match_token
from tooldispatch.repair.types import is_mapping
from tooldispatch.types import RepairLevel


@dataclass(init=False, slots=True)
class KeyPlan:
    """How the keys of one object are renamed.

    Attributes:
        renames: written key → (declared key, edit distance).
        hints: written key → a sentence for the error message when it could not be renamed.
    """

    renames: dict[str, tuple[str, int]] = field(default_factory=dict)
    hints: dict[str, str] = field(default_factory=dict)

    def __init__(self, renames: dict[str, tuple[str, int]] | None = None, hints: dict[str, str] | None = None) -> None:
        self.renames = {} if renames is None else renames
        self.hints = {} if hints is None else hints


def _matches_pattern(key: str, patterns: Any) -> bool:
    if not is_mapping(patterns):
        return False
    for pattern in patterns:
        try:
            if re.search(pattern, key):
                return True
        except re.error:
            continue
    return False


def plan_keys(value: Mapping[str, Any], schema: Mapping[str, Any], *, level: RepairLevel) -> KeyPlan:
    """Decide which keys of ``value`` to rename to the properties ``schema`` declares."""
    plan = KeyPlan()
    props = schema.get("properties")
    if level == "none" or not is_mapping(props) or not props:
        return plan
    unknown = [key for key in value if key not in props]
    if not unknown:
        return plan
    free = [name for name in props if name not in value]
    patterns = schema.get("patternProperties")
    for key in unknown:
        if _matches_pattern(key, patterns):
            continue
        open_names = [name for name in free if name not in {t for t, _ in plan.renames.values()}]
        match = match_token(key, open_names, level=level)
        if match.value is not None:
            plan.renames[key] = (match.value, match.distance)
        elif match.ambiguous:
            tied = ", ".join(json.dumps(name) for name in match.ambiguous)
            plan.hints[key] = f"it is equally close to {tied}, so it was not guessed"
        elif match.suggestion is not None:
            plan.hints[key] = f"did you mean {json.dumps(match.suggestion)}? near matches are not applied to this tool"
    return plan
