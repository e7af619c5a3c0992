"""The agent loop, its budgets and its records."""

from tooldispatch.agent.loop import Agent, AgentEvent, CallDispatched, ModelStreamed, RunEnded, TurnParsed, TurnStarted
from tooldispatch.agent.records import AgentRun, Budget, ToolRun, Turn

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentRun",
    "Budget",
    "CallDispatched",
    "ModelStreamed",
    "RunEnded",
    "ToolRun",
    "Turn",
    "TurnParsed",
    "TurnStarted",
]
