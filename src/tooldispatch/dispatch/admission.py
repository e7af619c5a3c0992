"""Admission: pure decisions on whether a call may run, made before anything runs.

Order, as the dispatcher applies it: the name (unknown → ``tool_hallucination``), then, after the
arguments validated, the quota (``quota_exceeded``), the freshness of required state
(``stale_state_must_refresh``), and approval (``awaiting_approval``). Each function takes the facts it
needs (counts, timestamps) and returns a decision; the dispatcher reads and writes the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rapidfuzz import fuzz, process
from rapidfuzz.distance import Levenshtein

from tooldispatch.dispatch.registry import ToolDef


@dataclass(frozen=True, slots=True)
class Admission:
    """An admission decision.

    Attributes:
        outcome: ``admit``, ``reject`` or ``approval`` (suspend until a person decides).
        reason: the rejection reason (``None`` when admitted).
        message: what happened, for the model.
        suggestion: what the model should do next.
    """

    outcome: Literal["admit", "reject", "approval"]
    reason: str | None = None
    message: str = ""
    suggestion: str | None = None


ADMIT = Admission("admit")


def nearest_names(name: str, names: Sequence[str], limit: int = 3) -> list[str]:
    """Registered names closest to ``name``: small edit distance first, then fuzzy similarity."""
    if not names:
        return []
    folded = name.lower().replace("-", "_")
    by_distance = sorted((Levenshtein.distance(folded, n.lower().replace("-", "_")), i, n) for i, n in enumerate(names))
    close = [n for d, _, n in by_distance if d <= max(2, len(name) // 4)]
    for match, score, _ in process.extract(name, list(names), scorer=fuzz.WRatio, limit=limit):
        if score >= 60 and match not in close:
            close.append(match)
    return close[:limit]


def admit_name(name: str, names: Sequence[str]) -> Admission:
    """Reject a call to a tool that is not registered, suggesting the nearest names."""
    if name in names:
        return ADMIT
    near = nearest_names(name, names)
    suggestion = (
        f"did you mean {' or '.join(repr(n) for n in near)}?" if near else f"available tools: {', '.join(names)}"
    )
    return Admission(
        "reject",
        "tool_hallucination",
        f"there is no tool named {name!r}",
        f"{suggestion} Call only the declared tools.",
    )


def quota_scope(tool: ToolDef, args: Mapping[str, Any], session_id: str) -> str | None:
    """The key a quota is counted under: the session, or the value of the ``per`` argument."""
    if tool.quota is None:
        return None
    if tool.quota.per is None:
        return f"session:{session_id}"
    return f"{tool.quota.per}={json.dumps(args.get(tool.quota.per), sort_keys=True)}"


def admit_quota(tool: ToolDef, args: Mapping[str, Any], used: int) -> Admission:
    """Reject when the quota's scope has used up its limit."""
    quota = tool.quota
    if quota is None or used < quota.limit:
        return ADMIT
    where = "this session" if quota.per is None else f"{quota.per}={json.dumps(args.get(quota.per))}"
    return Admission(
        "reject",
        "quota_exceeded",
        f"{tool.name} may run at most {quota.limit} time(s) for {where}; it already ran {used} time(s)",
        "do not call it again for this resource; choose another resource or tell the user the limit was reached"
        if quota.per
        else "do not call it again in this session; tell the user the limit was reached",
    )


def admit_freshness(tool: ToolDef, refreshed_at: float | None, now: float, refresher: str | None) -> Admission:
    """Reject when the state the tool depends on was not refreshed recently enough in this session."""
    fresh = tool.requires_fresh_state
    if fresh is None:
        return ADMIT
    if refreshed_at is not None and now - refreshed_at <= fresh.max_age_s:
        return ADMIT
    age = "was never refreshed in this session" if refreshed_at is None else f"is {now - refreshed_at:.0f} s old"
    how = f"call {refresher} first, then call {tool.name} again" if refresher else f"refresh {fresh.resource} first"
    return Admission(
        "reject",
        "stale_state_must_refresh",
        f"{tool.name} needs {fresh.resource!r} refreshed within {fresh.max_age_s:g} s; it {age}",
        how,
    )


def admit_approval(tool: ToolDef, approved: bool) -> Admission:
    """Suspend a call that needs a person's approval and has not had it."""
    if not tool.needs_approval or approved:
        return ADMIT
    return Admission(
        "approval",
        "awaiting_approval",
        f"{tool.name} needs a person's approval before it runs; the call is suspended",
        "do not call it again; wait for the approval decision or continue with other work",
    )
