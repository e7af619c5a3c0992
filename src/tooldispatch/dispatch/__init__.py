"""The dispatch layer: registry, admission, validation, timers, retries, idempotency, bounding, sagas,
traces and metrics. ``Registry`` and ``Dispatcher`` are the entry points."""

from tooldispatch.dispatch.clock import Clock, ManualClock, SystemClock
from tooldispatch.dispatch.dispatcher import Dispatcher
from tooldispatch.dispatch.metrics import THRESHOLDS, MetricsReport, ToolMetrics
from tooldispatch.dispatch.registry import FreshState, Quota, Registry, ToolDef
from tooldispatch.dispatch.result import DispatchResult
from tooldispatch.dispatch.retry import RetryDecision, decide
from tooldispatch.dispatch.saga import SagaEntry
from tooldispatch.dispatch.state import PendingApproval
from tooldispatch.dispatch.trace import DispatchTrace

__all__ = [
    "THRESHOLDS",
    "Clock",
    "DispatchResult",
    "DispatchTrace",
    "Dispatcher",
    "FreshState",
    "ManualClock",
    "MetricsReport",
    "PendingApproval",
    "Quota",
    "Registry",
    "RetryDecision",
    "SagaEntry",
    "SystemClock",
    "ToolDef",
    "ToolMetrics",
    "decide",
]
