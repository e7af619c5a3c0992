"""The BFCL AST checker, on the real possible-answer files of bfcl-eval."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.bench.bfcl_checker import answer_from_truth, check, standardize_string
from tooldispatch.bench.bfcl_data import BfclCase, load_category
from tooldispatch.errors import ConfigError

FIVE = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")


def _cases(category: str) -> list[BfclCase]:
    try:
        return load_category(category)
    except ConfigError as exc:  # the wheel could not be fetched (no PyPI access)
        pytest.skip(str(exc))


@pytest.mark.parametrize("category", FIVE)
def test_first_possible_answer_passes_every_case(category: str) -> None:
    """A call built from the first possible answer is valid for every case of the five main categories."""
    cases = _cases(category)
    failures = [(c.id, check(c, answer_from_truth(c)).detail) for c in cases]
    assert [f for f in failures if f[1]] == []
    assert len(cases) == {"simple_python": 400, "multiple": 200, "parallel": 200}.get(category, len(cases))


def _declared(case: BfclCase, name: str) -> dict[str, Any]:
    fn = next(f for f in case.functions if f["name"] == name)
    return dict(fn["parameters"]["properties"])


def test_wrong_function_name_fails_with_wrong_function() -> None:
    """Renaming the called function is a wrong_function failure on every simple case."""
    reasons = set()
    for case in _cases("simple_python"):
        [(name, args)] = answer_from_truth(case)
        reasons.add(check(case, [(name + "_x", args)]).reason)
    assert reasons == {"wrong_function"}


def test_dropping_a_required_argument_fails_with_missing_argument() -> None:
    """Removing a required argument is a missing_argument failure."""
    seen = 0
    for case in _cases("multiple"):
        [(name, args)] = answer_from_truth(case)
        fn = next(f for f in case.functions if f["name"] == name)
        required = [r for r in fn["parameters"].get("required", []) if r in args]
        if not required:
            continue
        del args[required[0]]
        assert check(case, [(name, args)]).reason == "missing_argument", case.id
        seen += 1
    assert seen > 150


def test_an_extra_argument_fails_with_unexpected_argument() -> None:
    """An argument that the function does not declare is an unexpected_argument failure."""
    for case in _cases("simple_python")[:100]:
        [(name, args)] = answer_from_truth(case)
        args["zz_not_declared"] = 1
        assert check(case, [(name, args)]).reason == "unexpected_argument", case.id


def test_string_argument_given_as_number_fails_with_wrong_type() -> None:
    """A number where the declared type is string (and the answers are strings) is a wrong_type failure."""
    seen = 0
    for case in _cases("simple_python"):
        [(name, args)] = answer_from_truth(case)
        props = _declared(case, name)
        key = next((k for k, v in args.items() if props[k].get("type") == "string" and isinstance(v, str)), None)
        if key is None:
            continue
        args[key] = 12345
        assert check(case, [(name, args)]).reason == "wrong_type", case.id
        seen += 1
    assert seen > 100


def test_other_string_value_fails_with_wrong_value() -> None:
    """A string that is none of the accepted values is a wrong_value failure."""
    seen = 0
    for case in _cases("simple_python"):
        [(name, args)] = answer_from_truth(case)
        props = _declared(case, name)
        key = next((k for k, v in args.items() if props[k].get("type") == "string" and isinstance(v, str)), None)
        if key is None:
            continue
        args[key] = "qqq not an answer qqq"
        assert check(case, [(name, args)]).reason == "wrong_value", case.id
        seen += 1
    assert seen > 100


def test_other_integer_value_fails_with_wrong_value() -> None:
    """An integer that is none of the accepted values is a wrong_value failure."""
    seen = 0
    for case in _cases("simple_python"):
        [(name, args)] = answer_from_truth(case)
        props = _declared(case, name)
        key = next((k for k, v in args.items() if props[k].get("type") == "integer" and type(v) is int), None)
        if key is None:
            continue
        args[key] = 987654321
        assert check(case, [(name, args)]).reason == "wrong_value", case.id
        seen += 1
    assert seen > 100


def test_parallel_calls_match_in_any_order_with_bfcl_greedy_matching() -> None:
    """Reversed parallel calls stay valid, except parallel_178, where BFCL's greedy matching fails too.

    Its first expected call accepts "Microsoft" or "Apple", so greedy matching gives it the reversed list's
    first Apple call, which the third expected call needed.
    """
    failing = [c.id for c in _cases("parallel") if not check(c, list(reversed(answer_from_truth(c)))).valid]
    assert failing == ["parallel_178"]


def test_parallel_with_a_call_missing_fails_with_wrong_count() -> None:
    """Dropping one of the parallel calls is a wrong_count failure."""
    for case in _cases("parallel"):
        calls = answer_from_truth(case)
        assert check(case, calls[:-1]).reason == "wrong_count", case.id


def test_parallel_with_one_wrong_value_reports_the_value() -> None:
    """In parallel_0, swapping one duration gives wrong_value for the unmatched call."""
    case = _cases("parallel")[0]
    calls = answer_from_truth(case)
    assert calls == [
        ("spotify.play", {"artist": "Taylor Swift", "duration": 20}),
        ("spotify.play", {"artist": "Maroon 5", "duration": 15}),
    ]
    result = check(case, [calls[0], ("spotify.play", {"artist": "Maroon 5", "duration": 16})])
    assert (result.valid, result.reason) == (False, "wrong_value")


def test_irrelevance_is_right_only_without_a_call() -> None:
    """On irrelevance, no call is correct and any call is an unexpected_call."""
    case = _cases("irrelevance")[0]
    fn = case.functions[0]
    assert check(case, []).valid is True
    assert check(case, [(fn["name"], {"weight": 70.0, "height": 1.8})]).reason == "unexpected_call"


def test_strings_are_normalized_and_bools_are_not_integers() -> None:
    """simple_python_0 accepts 'Units' for 'units' and an omitted optional unit, and rejects True as a base."""
    case = _cases("simple_python")[0]
    assert check(case, [("calculate_triangle_area", {"base": 10, "height": 5, "unit": "Units"})]).valid is True
    assert check(case, [("calculate_triangle_area", {"base": 10, "height": 5})]).valid is True
    assert check(case, [("calculate_triangle_area", {"base": True, "height": 5})]).reason == "wrong_type"


def test_an_integer_is_accepted_for_a_float() -> None:
    """Every whole-number float answer in simple_python is also accepted when written as an int."""
    seen = 0
    for case in _cases("simple_python"):
        [(name, args)] = answer_from_truth(case)
        props = _declared(case, name)
        key = next((k for k, v in args.items() if props[k].get("type") == "float" and float(v).is_integer()), None)
        if key is None:
            continue
        args[key] = int(args[key])
        assert check(case, [(name, args)]).valid is True, case.id
        seen += 1
    assert seen == 7


def test_standardize_string_follows_bfcl() -> None:
    """BFCL's normalization drops spaces and ,./-_*^, lowercases, and turns ' into "."""
    assert standardize_string("April 1, 2024") == "april12024"
    assert standardize_string("New_York-City.") == "newyorkcity"
    assert standardize_string("it's") == 'it"s'


def test_bfcl_types_map_to_json_schema() -> None:
    """dict/float/tuple/any become object/number/array/untyped in the tools given to the parser."""
    case = next(c for c in _cases("irrelevance") if c.id == "irrelevance_0")
    [tool] = case.tools()
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "weight": {"type": "number", "description": "Weight of the individual in kilograms."},
            "height": {"type": "number", "description": "Height of the individual in meters."},
        },
        "required": ["weight", "height"],
    }
