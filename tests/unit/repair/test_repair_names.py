"""Tool names: exact, normalized, bounded nearest, ties, and what each level allows."""

from __future__ import annotations

import pytest

from tooldispatch.repair import match_token, resolve_name
from tooldispatch.repair.names import Match, by_nearness, canonical
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Repair


@pytest.mark.parametrize("written", ["get-weather", "GetWeather", "get weather", "GET_WEATHER", " get_weather "])
def test_lossless_normalizes_case_and_separators(written: str, tools: dict[str, ToolSpec]) -> None:
    """Case, hyphens, spaces and surrounding whitespace resolve to the declared name with distance 0."""
    assert resolve_name(written, tools, level="lossless") == (
        "get_weather",
        (Repair("name", "", written, "get_weather", 0),),
    )


def test_exact_name_needs_no_repair(tools: dict[str, ToolSpec]) -> None:
    """A declared name resolves to itself with no repair, at every level."""
    for level in ("none", "lossless", "bounded"):
        assert resolve_name("get_weather", tools, level=level) == ("get_weather", ())


def test_level_none_refuses_normalization(tools: dict[str, ToolSpec]) -> None:
    """At level none even a case difference is not repaired."""
    assert resolve_name("GetWeather", tools, level="none") == (None, ())


def test_bounded_accepts_distance_two(tools: dict[str, ToolSpec]) -> None:
    """Two edits from a unique declared name are repaired at level bounded and the distance is recorded."""
    assert resolve_name("plce_ordr", tools, level="bounded") == (
        "place_order",
        (Repair("name", "", "plce_ordr", "place_order", 2),),
    )


def test_bounded_rejects_distance_three(tools: dict[str, ToolSpec]) -> None:
    """Three edits are beyond the bound."""
    assert resolve_name("plc_ordr", tools, level="bounded") == (None, ())


def test_lossless_refuses_distance_repair(tools: dict[str, ToolSpec]) -> None:
    """A one-edit typo is not repaired at level lossless."""
    assert resolve_name("place_ordr", tools, level="lossless") == (None, ())


def test_tie_is_never_guessed() -> None:
    """A name one edit from two declared names resolves to neither."""
    tools = {n: ToolSpec(n) for n in ("get_cat", "get_car")}
    assert resolve_name("get_ca", tools, level="bounded") == (None, ())
    assert match_token("get_ca", tools, level="bounded") == Match(None, 1, ("get_cat", "get_car"))


def test_normalized_tie_is_never_guessed() -> None:
    """Two declared names with the same normalized form make a normalized match ambiguous."""
    tools = {n: ToolSpec(n) for n in ("getWeather", "get_weather")}
    assert match_token("GET-WEATHER", tools, level="bounded") == Match(None, 0, ("getWeather", "get_weather"))


def test_short_names_need_half_kept() -> None:
    """A fuzzy match may not replace more than half of a short name: ``cd`` is not ``ls``."""
    assert match_token("cd", ["ls"], level="bounded") == Match(None)
    assert match_token("lx", ["ls"], level="bounded") == Match("ls", 1)


def test_lossless_reports_the_near_match_it_did_not_apply() -> None:
    """At level lossless the unique near match is returned as a suggestion, not a value."""
    assert match_token("celsus", ["celsius", "fahrenheit"], level="lossless") == Match(None, 1, (), "celsius")


def test_canonical_form() -> None:
    """The normalized form drops separators and whitespace and folds case."""
    assert canonical("Get-Weather_now .v2") == "getweathernowv2"


def test_by_nearness_orders_nearest_first() -> None:
    """Declared names are listed nearest first, ties in declaration order."""
    assert by_nearness("get_wether", ["search_web", "get_forecast", "get_weather"]) == [
        "get_weather",
        "search_web",
        "get_forecast",
    ]
