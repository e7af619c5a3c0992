"""scan_markers: the one-pass check that decides which strict finders run."""

from __future__ import annotations

from tooldispatch.parsing._markers import JSON_START, PY_LIST, for_view, scan_markers


def test_finds_markers_by_lead_character() -> None:
    """Markers after '<', '[' and '`' are all reported, each once."""
    text = "a <tool_call> b [TOOL_CALLS] c ```tool_code d <think> <tool_call>"
    assert scan_markers(text) == frozenset({"<tool_call>", "[TOOL_CALLS]", "```tool_code", "<think>"})


def test_pseudo_markers() -> None:
    """A leading '{' gives JSON_START; a '[name(' anywhere gives PY_LIST."""
    assert scan_markers('  {"name": "a"}') == frozenset({JSON_START})
    assert scan_markers("text\n[get_time()]") == frozenset({PY_LIST})
    assert scan_markers("[1, 2] and [x]") == frozenset()


def test_deepseek_spellings_share_a_prefix() -> None:
    """Full-width and ASCII DeepSeek tokens are both seen."""
    assert scan_markers("<｜tool▁call▁begin｜>") == frozenset({"<｜tool"})
    assert scan_markers("<|tool_call_begin|>") == frozenset({"<|tool"})


def test_partial_markers_are_not_markers() -> None:
    """Incomplete spellings do not select a finder."""
    assert scan_markers("<tool_cal> [TOOL_CALL] ``tool_code <|python_start| <function") == frozenset()


def test_for_view_recomputes_json_start() -> None:
    """JSON_START follows the view: a think block before the JSON hides nothing from it."""
    assert for_view(frozenset({"<think>"}), "       " + '{"a": 1}') == frozenset({"<think>", JSON_START})
    assert for_view(frozenset({JSON_START}), "x {") == frozenset()
