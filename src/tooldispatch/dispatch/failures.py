"""What the model is told when a tool fails: the reason, a message, a suggestion, and whether it can recover.

A failure whose side effect may have happened (a side-effecting tool that failed during or after
execution) is never recoverable by repeating the call: the suggestion asks the model to check the
state first.
"""

from __future__ import annotations

from tooldispatch.dispatch.executor import ChildProcessDied, InvalidResult, NoCapacity, RemoteToolException, shown
from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.dispatch.retry import Phase, is_permanent
from tooldispatch.errors import ToolError, ToolTimeout


def describe_failure(tool: ToolDef, error: BaseException, phase: Phase) -> tuple[str, str, str | None, bool]:
    """Reason, message, suggestion and recoverability for a failed call."""
    side = tool.side_effecting
    if isinstance(error, ToolTimeout):
        if side:
            return (
                "timeout",
                shown(error),
                "the action may or may not have happened; check the state with a read-only tool before "
                "doing anything else",
                False,
            )
        return "timeout", shown(error), "try again later, or ask for less", True
    if isinstance(error, NoCapacity):
        return (
            "no_capacity",
            shown(error),
            "it did not run; try again later, or do something else first",
            True,
        )
    if isinstance(error, InvalidResult):
        return (
            "invalid_result",
            f"{tool.name} returned a value that is not JSON: {shown(error)}",
            "this is a bug in the tool; do not call it again and tell the user",
            False,
        )
    if isinstance(error, ToolError):
        detail = f"{tool.name} failed: {shown(error)}" + (f" (status {error.status})" if error.status else "")
        if is_permanent(error):
            return "tool_error", detail, "the request was refused; change the arguments or the plan", True
        if phase == "before" or not side:
            return "tool_error", detail, "the service is unavailable; try again later", True
        return (
            "tool_error",
            detail,
            "the action may or may not have happened; check the state before doing anything else",
            False,
        )
    if isinstance(error, ChildProcessDied):
        return (
            "exception",
            f"{tool.name} crashed: {shown(error)}",
            "the action may or may not have happened; check the state and tell the user"
            if side
            else "do not call it again with the same arguments; tell the user",
            False,
        )
    if isinstance(error, ConnectionRefusedError | OSError) and phase == "before":
        return "tool_error", f"{tool.name} could not reach its service: {shown(error)}", "try again later", True
    name = error.type_name if isinstance(error, RemoteToolException) else type(error).__name__
    text = shown(error) if isinstance(error, RemoteToolException) else f"{name}: {shown(error)}"
    return (
        "exception",
        f"{tool.name} raised an unexpected error: {text}",
        "the action may or may not have happened; check the state and tell the user"
        if side
        else "do not call it again with the same arguments; tell the user",
        False,
    )
