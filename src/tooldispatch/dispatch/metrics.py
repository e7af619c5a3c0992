"""Per-tool rates from the persisted traces, flagged against action thresholds.

================================  =========  ===============================================
rate                              flag when  what to do
================================  =========  ===============================================
validation failures               > 15 %     the schema or description is unclear to the model
timeouts                          > 5 %      the timeout is too tight or the tool is unhealthy
retries                           > 10 %     the tool or its service is flaky
idempotent hits (replays)         > 5 %      the model repeats calls; check the loop's prompts
bounded results                   > 20 %     results are too large; paginate or summarize
unexpected exceptions             > 0        a tool bug: fix the tool
hallucinated tool names           > 0        the model calls tools that do not exist
================================  =========  ===============================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

THRESHOLDS: dict[str, float] = {
    "validation_failure": 0.15,
    "timeout": 0.05,
    "retry": 0.10,
    "idempotent_hit": 0.05,
    "bounding": 0.20,
    "unexpected_exception": 0.0,
    "hallucination": 0.0,
}

ACTIONS: dict[str, str] = {
    "validation_failure": "the schema or description is unclear to the model",
    "timeout": "the timeout is too tight or the tool is unhealthy",
    "retry": "the tool or its service is flaky",
    "idempotent_hit": "the model repeats calls",
    "bounding": "results are too large; paginate or summarize",
    "unexpected_exception": "a tool raised an unexpected exception; fix the tool",
    "hallucination": "the model called a tool that does not exist",
}

COUNTERS = (
    "validation_failure",
    "timeout",
    "retry",
    "idempotent_hit",
    "bounding",
    "unexpected_exception",
    "hallucination",
)


@dataclass(frozen=True, slots=True)
class ToolMetrics:
    """Rates for one tool (or for every call, under the name ``*``).

    Attributes:
        tool: the tool name as called.
        calls: traces counted.
        counts: events per counter name (see ``COUNTERS``).
        rates: ``counts / calls`` per counter (0 when there were no calls).
        flags: counter names whose rate is over its threshold, in ``COUNTERS`` order.
    """

    tool: str
    calls: int
    counts: Mapping[str, int]
    rates: Mapping[str, float]
    flags: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return {
            "tool": self.tool,
            "calls": self.calls,
            "counts": dict(self.counts),
            "rates": dict(self.rates),
            "flags": list(self.flags),
        }


def rates_for(tool: str, calls: int, counts: Mapping[str, int]) -> ToolMetrics:
    """Turn raw counts into rates and flags (pure)."""
    full = {name: int(counts.get(name, 0)) for name in COUNTERS}
    rates = {name: (full[name] / calls if calls else 0.0) for name in COUNTERS}
    flags = tuple(name for name in COUNTERS if calls and rates[name] > THRESHOLDS[name])
    return ToolMetrics(tool=tool, calls=calls, counts=full, rates=rates, flags=flags)


def count_trace(trace: Mapping[str, Any]) -> dict[str, int]:
    """Which counters one trace (as a dict) adds to."""
    reason = trace.get("reason")
    return {
        "validation_failure": int(reason == "validation"),
        "timeout": int(reason == "timeout"),
        "retry": int(bool(trace.get("retried"))),
        "idempotent_hit": int(reason == "idempotent_replay"),
        "bounding": int((trace.get("bounded_chars") or 0) > 0),
        "unexpected_exception": int(reason == "exception"),
        "hallucination": int(reason == "tool_hallucination"),
    }


@dataclass(frozen=True, slots=True)
class MetricsReport:
    """Metrics per tool and over all calls.

    Attributes:
        tools: per tool name, in first-seen order.
        overall: every call together (``tool == "*"``).
    """

    tools: Mapping[str, ToolMetrics]
    overall: ToolMetrics
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, tool: str) -> ToolMetrics:
        return self.tools[tool]

    def __iter__(self) -> Iterator[ToolMetrics]:
        return iter(self.tools.values())

    @property
    def flagged(self) -> list[str]:
        """One line per flag: ``tool: counter rate (threshold) — action``."""
        lines = []
        for m in self.tools.values():
            for name in m.flags:
                lines.append(
                    f"{m.tool}: {name} {m.rates[name]:.1%} (threshold {THRESHOLDS[name]:.0%}) — {ACTIONS[name]}"
                )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form."""
        return {"tools": {k: v.to_dict() for k, v in self.tools.items()}, "overall": self.overall.to_dict()}


def report(traces: list[Mapping[str, Any]]) -> MetricsReport:
    """Build the report from trace dicts (``DispatchTrace.to_dict`` shape)."""
    per_tool: dict[str, tuple[int, dict[str, int]]] = {}
    total = {name: 0 for name in COUNTERS}
    for trace in traces:
        name = str(trace.get("tool"))
        calls, counts = per_tool.setdefault(name, (0, {n: 0 for n in COUNTERS}))
        for counter, value in count_trace(trace).items():
            counts[counter] += value
            total[counter] += value
        per_tool[name] = (calls + 1, counts)
    tools = {name: rates_for(name, calls, counts) for name, (calls, counts) in per_tool.items()}
    return MetricsReport(tools=tools, overall=rates_for("*", len(traces), total))
