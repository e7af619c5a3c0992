"""Schema-guided repair and validation of tool calls.

``repair_call`` resolves the tool name, repairs the arguments against the tool's JSON Schema as far as
the repair level allows (each edit recorded as a :class:`~tooldispatch.types.Repair`) and validates the
result with ``jsonschema``. Everything here is a pure function of its inputs.
"""

from __future__ import annotations

from tooldispatch.repair.call import RepairResult, repair_arguments, repair_call
from tooldispatch.repair.names import MAX_DISTANCE, canonical, match_token, resolve_name
from tooldispatch.repair.validate import schema_errors

__all__ = [
    "MAX_DISTANCE",
    "RepairResult",
    "canonical",
    "match_token",
    "repair_arguments",
    "repair_call",
    "resolve_name",
    "schema_errors",
]
