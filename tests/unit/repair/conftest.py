"""Tool declarations shared by the repair tests."""

from __future__ import annotations

import pytest

from tooldispatch.toolspec import ToolSpec, normalize_tools

from .schemas import ORDER, WEATHER


@pytest.fixture()
def tools() -> dict[str, ToolSpec]:
    """Two tools with names close to each other and one nested schema."""
    return normalize_tools(
        [
            {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
            {"type": "function", "function": {"name": "get_forecast", "parameters": WEATHER}},
            {"type": "function", "function": {"name": "place_order", "parameters": ORDER}},
            {"type": "function", "function": {"name": "search_web", "parameters": {"type": "object"}}},
        ]
    )
