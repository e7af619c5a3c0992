"""scan_markers (the one-pass check that decides which strict finders run), contains and find."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing._markers import JSON_START, PY_LIST, contains, contains_any, find, for_view, scan_markers


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


_MARKER_PIECES = st.lists(
    st.sampled_from(["<", ">", "]", "<|", "think>", "THINK]", "<tool_call>", "</tool_call>", "a", "k", " ", "é"]),
    max_size=40,
)
# Short texts take the plain scan, long ones (the same pieces repeated) the jumps between lead characters.
_MARKER_TEXT = st.tuples(_MARKER_PIECES.map("".join), st.sampled_from([1, 60])).map(lambda p: p[0] * p[1])


@settings(max_examples=300, deadline=None)
@given(_MARKER_TEXT, st.sampled_from(["<|", "think>", "THINK]", "<arg_key>", "<tool_call>", "</tool_call>", "ab"]))
def test_contains_is_the_in_operator(text: str, marker: str) -> None:
    """contains(text, marker) answers exactly as ``marker in text``."""
    assert contains(text, marker) == (marker in text)


@settings(max_examples=300, deadline=None)
@given(
    _MARKER_TEXT,
    st.sampled_from(["<tool_call>", "</tool_call>", "<|", "ab"]),
    st.integers(0, 3000),
    st.integers(0, 3000),
)
def test_find_is_str_find(text: str, marker: str, start: int, end: int) -> None:
    """find(text, marker, start, end) returns exactly what ``str.find`` returns."""
    assert find(text, marker, start, end) == text.find(marker, start, end)


def test_many_lead_characters_fall_back_to_one_plain_scan() -> None:
    """Past the bound on occurrences tested one by one, the answer still matches ``in`` and ``str.find``."""
    text = "<" * 1000 + "<tool_call>" + ">" * 1000 + "think>"
    assert (contains(text, "<tool_call>"), contains(text, "think>"), contains(text, "<|")) == (True, True, False)
    assert find(text, "<tool_call>") == 1000
    assert contains_any(text, ("<|", "THINK]")) is False


_ALL_MARKERS = ["<tool_call>", "<function=", "<invoke", "<|python_start|>", "<|python_tag|>", "<|channel|>"]
_ALL_MARKERS += ["<|message|>", "<|start|>", "<think>", "</think>", "<|tool", "<｜tool", "[TOOL_CALLS]", "[THINK]"]
_ALL_MARKERS += ["[/THINK]", "```tool_code", "```tool_call"]
_SCAN_PIECES = st.lists(st.sampled_from([*_ALL_MARKERS, "[f(", "{", " ", "\n", "x", "<", "[", "`", "|>"]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.tuples(_SCAN_PIECES.map("".join), st.sampled_from([1, 200])).map(lambda p: p[0] * p[1]))
def test_scan_markers_reports_each_marker_in_the_text(text: str) -> None:
    """Short texts (one ``in`` per marker) and long ones (jumps between leads) give the same answer as ``in``."""
    expected = {m for m in _ALL_MARKERS if m in text}
    if "[f(" in text:
        expected.add(PY_LIST)
    if text.lstrip().startswith("{"):
        expected.add(JSON_START)
    assert scan_markers(text) == frozenset(expected)


@settings(max_examples=200, deadline=None)
@given(st.tuples(_SCAN_PIECES.map("".join), st.sampled_from([1, 200])).map(lambda p: p[0] * p[1]))
def test_auto_selects_every_format_whose_marker_appears_in_listed_order(text: str) -> None:
    """The formats ``auto`` runs are those whose markers the scan found, in the order of the format list."""
    from tooldispatch.parsing.finders import select_formats
    from tooldispatch.parsing.formats import _AUTO

    present = scan_markers(text)
    assert select_formats(text, "auto", present) == [f for f in _AUTO if not present.isdisjoint(f.markers)]
