"""A BFCL-compatible AST checker for Python categories.

It follows the semantics of BFCL's own ``ast_checker`` (bfcl-eval 2026.3.23), rewritten here:

- every argument has a list of accepted values; ``""`` in that list means the argument may be omitted;
- types are checked exactly against BFCL's Python types (``True`` is not an integer), except that an
  integer is accepted for ``float``; when the accepted values have another type than the declared one (a
  "variable"), a value of the accepted values' type is allowed;
- strings (also inside lists and dicts) are compared after BFCL's normalization: spaces and ``,./-_*^``
  removed, lower-cased, ``'`` turned into ``"``;
- ``multiple`` checks one call against the expected function; ``parallel`` matches calls to expected calls
  in any order (BFCL's greedy matching: each expected call takes the first unmatched call that fits);
- on the irrelevance categories the answer is right when there is no call.

Failures carry one of the reasons ``wrong_count``, ``wrong_function``, ``missing_argument``,
``unexpected_argument``, ``wrong_type``, ``wrong_value`` (and ``unexpected_call`` on irrelevance).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from tooldispatch.bench.bfcl_data import BfclCase

Reason = Literal[
    "wrong_count",
    "wrong_function",
    "missing_argument",
    "unexpected_argument",
    "wrong_type",
    "wrong_value",
    "unexpected_call",
]

_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_NESTED = ("array", "tuple")
_STRIP = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on one model answer.

    Attributes:
        valid: the answer is right.
        reason: why it is not (``None`` when valid).
        detail: a human-readable explanation.
    """

    valid: bool
    reason: Reason | None = None
    detail: str = ""


_OK = CheckResult(True)

Call = tuple[str, Mapping[str, Any]]
"""A call as the checker sees it: the function name and its arguments."""


def standardize_string(value: str) -> str:
    """Normalize a string the way BFCL does before comparing it."""
    return _STRIP.sub("", value).lower().replace("'", '"')


def check(case: BfclCase, calls: Sequence[Call], *, name_map: Mapping[str, str] | None = None) -> CheckResult:
    """Score the calls a model made on one BFCL case.

    Args:
        case: the case, with its functions and accepted answers.
        calls: the calls the model made, in order.
        name_map: tool name as sent → BFCL name, when names were rewritten for an API (dots → underscores).

    Returns:
        The verdict, with a reason when the answer is wrong.
    """
    if name_map:
        calls = [(name_map.get(name, name), args) for name, args in calls]
    if case.expects_no_call:
        if calls:
            return CheckResult(False, "unexpected_call", f"expected no call, got {len(calls)}")
        return _OK
    if case.ground_truth is None:  # live_relevance: any call is right
        return _OK if calls else CheckResult(False, "wrong_count", "expected at least one call, got none")
    truth = list(case.ground_truth)
    if len(calls) != len(truth):
        return CheckResult(False, "wrong_count", f"expected {len(truth)} call(s), got {len(calls)}")
    functions = {str(f["name"]): f for f in case.functions}
    if "parallel" in case.category:
        return _check_parallel(functions, calls, truth)
    return _check_one(functions, calls[0], truth[0])


def _check_parallel(functions: Mapping[str, Mapping[str, Any]], calls: Sequence[Call], truth: list[Any]) -> CheckResult:
    matched: set[int] = set()
    for expected in truth:
        name = next(iter(expected))
        best: CheckResult | None = None
        for index, call in enumerate(calls):
            if index in matched:
                continue
            result = _check_one(functions, call, expected)
            if result.valid:
                matched.add(index)
                best = None
                break
            if best is None or (best.reason == "wrong_function" and result.reason != "wrong_function"):
                best = result
        else:
            detail = best.detail if best else ""
            return CheckResult(False, best.reason if best else "wrong_count", f"no call matches {name}: {detail}")
    return _OK


def _check_one(functions: Mapping[str, Mapping[str, Any]], call: Call, expected: Mapping[str, Any]) -> CheckResult:
    expected_name = next(iter(expected))
    accepted: Mapping[str, list[Any]] = expected[expected_name]
    name, args = call
    if name != expected_name:
        return CheckResult(False, "wrong_function", f"expected {expected_name}, got {name}")
    doc = functions.get(expected_name, {})
    params = doc.get("parameters") or {}
    details: Mapping[str, Any] = params.get("properties") or {}
    for required in params.get("required") or ():
        if required not in args:
            return CheckResult(False, "missing_argument", f"missing required argument {required!r}")
    for param, value in args.items():
        if param not in details or param not in accepted:
            return CheckResult(False, "unexpected_argument", f"unexpected argument {param!r}")
        result = _check_value(param, value, details[param], accepted[param])
        if not result.valid:
            return result
    for param, values in accepted.items():
        if param not in args and "" not in values:
            return CheckResult(False, "missing_argument", f"argument {param!r} is expected and not optional")
    return _OK


def _check_value(param: str, value: Any, detail: Mapping[str, Any], accepted: list[Any]) -> CheckResult:
    declared = str(detail.get("type", "any"))
    expected_type = _PY_TYPES.get(declared)
    if expected_type is None:  # a type BFCL never uses: compare values only
        return _OK if value in accepted else _wrong_value(param, value, accepted)
    nested: type | None = None
    if declared in _NESTED:
        items = detail.get("items")
        item_type = items.get("type") if isinstance(items, Mapping) else None
        nested = _PY_TYPES.get(str(item_type)) if item_type else None
    if declared == "float" and type(value) is int:
        value = float(value)
    type_result, is_variable = _type_check(param, value, accepted, declared, expected_type, nested)
    if not type_result.valid:
        return type_result
    if not is_variable:
        if expected_type is dict:
            return _dict_check(param, value, accepted)
        if expected_type is list and nested is dict:
            return _list_of_dicts_check(param, value, accepted)
        if expected_type is str:
            normalized = [standardize_string(a) for a in accepted if isinstance(a, str)]
            return _OK if standardize_string(value) in normalized else _wrong_value(param, value, accepted)
        if expected_type is list:
            return _list_check(param, value, accepted)
    return _OK if value in accepted else _wrong_value(param, value, accepted)


def _answer_type(accepted: list[Any]) -> type | None:
    for answer in accepted:
        if answer != "":
            return type(answer)
    return None


def _type_check(
    param: str, value: Any, accepted: list[Any], declared: str, expected: type, nested: type | None
) -> tuple[CheckResult, bool]:
    answer_type = _answer_type(accepted)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return _OK, is_variable
        items = cast("list[Any]", value)
        for answer in accepted:
            if isinstance(answer, list) and not all(
                _type_check(param, item, answer, str(nested), nested, None)[0].valid for item in items
            ):
                continue
            return _OK, is_variable
        return CheckResult(False, "wrong_type", f"{param!r}: items of {value!r} are not {nested.__name__}"), False
    if answer_type is not None and type(value) is answer_type:
        return _OK, True
    got = type(value).__name__
    return CheckResult(False, "wrong_type", f"{param!r}: expected {declared}, got {got} ({value!r})"), False


def _norm(value: Any) -> Any:
    return standardize_string(value) if isinstance(value, str) else value


def _list_check(param: str, value: list[Any], accepted: list[Any]) -> CheckResult:
    normalized = [_norm(v) for v in value]
    options = [[_norm(v) for v in option] for option in accepted if isinstance(option, list)]
    return _OK if normalized in options else _wrong_value(param, value, accepted)


def _dict_check(param: str, value: Mapping[str, Any], accepted: list[Any]) -> CheckResult:
    failure = _wrong_value(param, value, accepted)
    for option in accepted:
        if option == "" or not isinstance(option, Mapping):
            continue
        ok = True
        for key, item in value.items():
            if key not in option or _norm(item) not in [_norm(a) for a in option[key]]:
                failure = _wrong_value(f"{param}.{key}", item, option.get(key, []))
                ok = False
                break
        if ok:
            for key, values in option.items():
                if key not in value and "" not in values:
                    failure = CheckResult(False, "wrong_value", f"{param!r}: missing key {key!r}")
                    ok = False
                    break
        if ok:
            return _OK
    return failure


def _list_of_dicts_check(param: str, value: list[Any], accepted: list[Any]) -> CheckResult:
    failure = _wrong_value(param, value, accepted)
    for option in accepted:
        if not isinstance(option, list) or len(option) != len(value):
            continue
        results = [
            _dict_check(param, item, [expected]) if isinstance(item, Mapping) else _wrong_value(param, item, [])
            for item, expected in zip(value, option, strict=True)
        ]
        bad = next((r for r in results if not r.valid), None)
        if bad is None:
            return _OK
        failure = bad
    return failure


def _wrong_value(param: str, value: Any, accepted: Sequence[Any]) -> CheckResult:
    return CheckResult(False, "wrong_value", f"{param!r}: {value!r} is not one of {list(accepted)!r:.200}")


def answer_from_truth(case: BfclCase, *, choice: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """Build the calls made of the ``choice``-th accepted value of every argument.

    ``""`` (optional) omits the argument, except for required arguments, which take their first real
    value; arguments the function does not declare are omitted when they are optional (two BFCL answers
    list such arguments). Used by tests as the reference answer that must pass.
    """
    calls: list[tuple[str, dict[str, Any]]] = []
    functions = {str(f["name"]): f for f in case.functions}
    for expected in case.ground_truth or ():
        name = next(iter(expected))
        params = functions.get(name, {}).get("parameters") or {}
        required = set(params.get("required") or ())
        declared = set(params.get("properties") or {})
        args: dict[str, Any] = {}
        for param, values in expected[name].items():
            options = [v for v in values if v != ""] if param in required else list(values)
            if param not in declared and "" in values:
                continue
            if options and (picked := options[min(choice, len(options) - 1)]) != "":
                args[param] = _materialize(picked, choice)
        calls.append((name, args))
    return calls


def _materialize(value: Any, choice: int) -> Any:
    """Dict answers hold accepted values per key (``{"k": [v, ""]}``): pick one per key, recursively."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, options in value.items():
            usable = [v for v in options if v != ""] if isinstance(options, list) else [options]
            if usable:
                out[key] = _materialize(usable[min(choice, len(usable) - 1)], choice)
        return out
    if isinstance(value, list):
        return [_materialize(v, choice) if isinstance(v, Mapping) else v for v in value]
    return value
