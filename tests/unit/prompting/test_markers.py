"""Splitting streamed output at reasoning markers."""

from __future__ import annotations

from tooldispatch.models import Reasoning
from tooldispatch.prompting import MarkerSplitter

THINK = Reasoning(open="<think>", close="</think>")


def _run(splitter: MarkerSplitter, deltas: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for d in deltas:
        out += splitter.feed(d)
    return out + splitter.flush()


def test_markers_split_across_deltas() -> None:
    """Markers cut across deltas are recognised; reasoning, its end and the content come out in order."""
    out = _run(MarkerSplitter(THINK), ["  <th", "ink>hm", "m</thi", "nk>\n\nAnswer"])
    assert out == [("reasoning", "hm"), ("reasoning", "m"), ("end", ""), ("content", "\n\nAnswer")]


def test_no_reasoning_block() -> None:
    """Output that does not open with the marker is all content, even if a marker appears later."""
    assert _run(MarkerSplitter(THINK), ["Hello ", "<think>x</think>"]) == [
        ("content", "Hello "),
        ("content", "<think>x</think>"),
    ]


def test_template_opened_block() -> None:
    """When the template opened the block, output is reasoning until the closing marker."""
    splitter = MarkerSplitter(Reasoning(open="<think>", close="</think>", starts_open=True))
    assert _run(splitter, ["plan", "</think>done"]) == [("reasoning", "plan"), ("end", ""), ("content", "done")]


def test_unclosed_reasoning_is_flushed() -> None:
    """A block still open at the end is flushed as reasoning, including a held-back partial marker."""
    assert _run(MarkerSplitter(THINK), ["<think>abc</th"]) == [("reasoning", "abc"), ("reasoning", "</th")]
