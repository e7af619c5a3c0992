"""The agent loop, its budgets and its records."""

from tooldispatch.agent.loop import (
    Agent,
    AgentEvent,
    CallDispatched,
    Decided,
    ModelStreamed,
    RunEnded,
    TurnParsed,
    TurnStarted,
)
from tooldispatch.agent.records import AgentRun, Budget, Held, Stuck, ToolRun, Turn

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Budget",
    "CallDispatched",
    "Decided",
    "Held",
    "ModelStreamed",
    "RunEnded",
    "Stuck",
    "ToolRun",
    "Turn",
    "TurnParsed",
    "TurnStarted",
]
