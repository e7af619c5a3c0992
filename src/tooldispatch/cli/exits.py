"""How ``tooldispatch run`` and ``chat`` end, as exit codes (documented in ``run --help`` and the README).

==== =====================================================================================
0    the model gave a final answer, and no call waits for a person
2    bad input or configuration (the one ``error:`` line says what to fix)
3    a budget ended the run: turns, completion tokens, wall time or the context window
4    the backend failed (a dead server, a model that could not be loaded, a broken stream)
5    a call waits for a person's approval (``tooldispatch approvals list``)
6    the run made no progress and was ended as ``stuck`` (``tooldispatch logs RUN`` shows the evidence)
70   a bug in tooldispatch (one line; ``TOOLDISPATCH_DEBUG=1`` shows the traceback)
130  interrupted (Ctrl-C)
==== =====================================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tooldispatch.agent.records import AgentRun

FINAL_ANSWER = 0
USAGE = 2
BUDGET = 3
BACKEND = 4
APPROVAL_PENDING = 5
STUCK = 6
INTERRUPTED = 130

HELP = (
    "Exit codes: 0 final answer; 2 bad input or configuration; 3 a budget ended the run (turns, tokens, wall "
    "time, context window); 4 the backend failed; 5 a call waits for approval (tooldispatch approvals list); 6 the "
    "run made no progress (stuck)."
)


def exit_code(run: AgentRun) -> int:
    """The exit code for how ``run`` ended: backend failure, then a pending approval, then stuck, then a budget."""
    if run.end == "backend_error":
        return BACKEND
    if any(r.result.status == "awaiting_approval" for r in run.tool_runs):
        return APPROVAL_PENDING
    if run.end == "stuck":
        return STUCK
    if run.end != "final_answer":
        return BUDGET
    return FINAL_ANSWER
