"""The reasoning split: think tags, [THINK], harmony channels, and offsets into the original text."""

from __future__ import annotations

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.models.manifest import Reasoning
from tooldispatch.parsing import lane
from tooldispatch.parsing._markers import scan_markers
from tooldispatch.parsing.reasoning import REASONING_TAGS, MarkerSplitter, split_reasoning


def test_think_block_is_reasoning_and_the_rest_is_content() -> None:
    """A closed <think> block becomes reasoning; the text after it is content."""
    split = split_reasoning("<think>plan it</think>The answer is 4.")
    assert split.reasoning == "plan it"
    assert split.content == "The answer is 4."
    assert split.spans("reasoning") == ((7, 14),)


def test_reasoning_open_makes_text_before_the_closer_reasoning() -> None:
    """With reasoning_open, the text up to </think> is reasoning even without an opener."""
    split = split_reasoning("still thinking</think>Done.", reasoning_open=True)
    assert split.reasoning == "still thinking"
    assert split.content == "Done."


def test_orphan_closer_without_reasoning_open_still_splits() -> None:
    """A </think> with no opener before it means the prompt opened the block."""
    split = split_reasoning("hmm</think>ok")
    assert (split.reasoning, split.content) == ("hmm", "ok")


def test_reasoning_open_without_closer_is_all_reasoning() -> None:
    """When the prompt opened the block and no closer came, the whole output is reasoning."""
    split = split_reasoning("thinking forever", reasoning_open=True)
    assert (split.reasoning, split.content) == ("thinking forever", "")


def test_unclosed_think_at_the_end_is_reasoning() -> None:
    """An opener that is never closed makes the rest of the text reasoning."""
    split = split_reasoning("Intro <think>cut off here")
    assert (split.reasoning, split.content) == ("cut off here", "Intro")


def test_bracket_think_dialect() -> None:
    """[THINK]…[/THINK] (Magistral) splits like <think>."""
    split = split_reasoning("[THINK]weigh options[/THINK]Pick B.")
    assert (split.reasoning, split.content) == ("weigh options", "Pick B.")


def test_reasoning_open_with_bracket_closer() -> None:
    """reasoning_open is closed by whichever dialect's closer appears."""
    split = split_reasoning("r[/THINK]c", reasoning_open=True)
    assert (split.reasoning, split.content) == ("r", "c")


def test_harmony_analysis_is_reasoning_and_final_is_content() -> None:
    """Harmony analysis bodies are reasoning, final bodies content, headers hidden."""
    text = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi!<|return|>"
    split = split_reasoning(text)
    assert (split.reasoning, split.content) == ("Think.", "Hi!")


def test_harmony_message_with_recipient_stays_whole_in_content() -> None:
    """A harmony message addressed to a tool is left whole for the harmony finder."""
    call = "<|start|>assistant<|channel|>commentary to=functions.f<|message|>{}<|call|>"
    split = split_reasoning("<|channel|>analysis<|message|>go<|end|>" + call)
    assert split.reasoning == "go"
    assert split.content == call


def test_views_keep_offsets() -> None:
    """Views have the text's length and blank out everything of the other kind."""
    text = "<think>abc</think>xyz"
    split = split_reasoning(text)
    assert split.view("content") == " " * 18 + "xyz"
    assert split.view("reasoning") == " " * 7 + "abc" + " " * 11
    assert len(split.view("content")) == len(text)


def test_text_without_markers_is_all_content() -> None:
    """Plain text has no reasoning."""
    split = split_reasoning("just text")
    assert (split.reasoning, split.content, split.has_reasoning) == ("", "just text", False)


def test_multiple_think_blocks_are_joined() -> None:
    """Several think blocks are joined line by line."""
    split = split_reasoning("<think>a</think>x<think>b</think>y")
    assert (split.reasoning, split.content) == ("a\nb", "xy")


def test_markers_inside_a_closed_tool_call_block_are_not_boundaries() -> None:
    """A reasoning marker written inside a call's arguments is text of the call, not the start of reasoning."""
    for marker in ("[THINK]", "<think>", "</think>", "[/THINK]"):
        text = f'<tool_call>{{"name": "f", "arguments": {{"q": "{marker}"}}}}</tool_call>'
        split = split_reasoning(text)
        assert (split.content, split.reasoning) == (text, ""), marker


def test_a_call_written_inside_a_think_block_stays_reasoning() -> None:
    """Markers outside the call still split: a call inside <think>…</think> is reasoning."""
    call = '<tool_call>{"name": "f", "arguments": {"q": "[THINK]"}}</tool_call>'
    split = split_reasoning(f"<think>plan {call}</think>done")
    assert (split.reasoning, split.content) == (f"plan {call}", "done")


def test_every_reasoning_tag_is_split_and_scanned() -> None:
    """Each pair of the one marker table is a reasoning block to the whole-text split and to the marker scan."""
    for opener, closer in REASONING_TAGS.items():
        text = f"{opener}plan{closer}Done."
        assert {opener, closer} <= scan_markers(text)
        split = split_reasoning(text)
        assert (split.reasoning, split.content) == ("plan", "Done.")


def test_the_streaming_splitter_reads_the_same_table() -> None:
    """MarkerSplitter splits at every pair of the table and refuses tags the whole-text split would not read."""
    for opener, closer in REASONING_TAGS.items():
        splitter = MarkerSplitter(Reasoning(open=opener, close=closer))
        out = splitter.feed(f"{opener}plan{closer}Done.") + splitter.flush()
        assert out == [("reasoning", "plan"), ("end", ""), ("content", "Done.")]
    with pytest.raises(ConfigError, match=r"reasoning markers <r>…</r> are not ones the parser reads"):
        MarkerSplitter(Reasoning(open="<r>", close="</r>"))
    with pytest.raises(ConfigError, match=r"set \[reasoning\] open/close to one of <think>…</think>"):
        MarkerSplitter(Reasoning(open="<think>", close="</reasoning>"))


def test_the_strict_lane_steps_aside_for_every_reasoning_tag() -> None:
    """Every tag of the table holds a marker that sends the text from the strict lane to the cascade's split."""
    for marker in (*REASONING_TAGS, *REASONING_TAGS.values()):
        assert any(token in marker for token in (*lane._FOREIGN, *lane._THINK)), marker
        assert any(token in marker for token in lane._TOKENS), marker
