"""StreamParser: early, safe events while streaming, and a final outcome equal to parsing the whole text."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing import _stream_tables as stream_module
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.stream import (
    CallReady,
    ContentText,
    ReasoningEnded,
    ReasoningText,
    StreamEvent,
    StreamParser,
)
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec, normalize_tools

_DECLARED: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
]
# The tools these tests read calls for are declared read-only: their calls may stand in running text and
# their names be repaired to a near match (a tool given as a plain dict is side-effecting: test_prose.py).
TOOLS: list[ToolSpec] = list(ToolPolicy.read_only(why="test tools").declare(normalize_tools(_DECLARED).values()))
HERMES = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
DSML = (
    'Checking.\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    "</｜DSML｜function_calls>\nDone."
)
SEED = (
    "<seed:think>Weather for Paris.</seed:think>Sure.<seed:tool_call>\n<function=get_weather>\n"
    "<parameter=city>Paris</parameter>\n</function>\n</seed:tool_call>"
)

SAMPLES = [
    f"Hello there. {HERMES} Bye.",
    '<think>I should check {weather}.</think>Sure! {"name": "get_weather", "arguments": {"city": "Paris"}}',
    'Let me call get_weather(city="Paris") and get_time().',
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
    'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    "a < b and x > y; [1, 2] {not json} <b>bold</b> [see (1)]",
    '<think>maybe get_weather(city="Rome")</think>No call here.',
    "<function=get_weather><parameter=city>Paris</parameter></function>",
    '<Tool_Call>{"name": "get_weather", "arguments": {"city": "Par',
    f"{HERMES}\n{HERMES.replace('Paris', 'Rome')}",
    'Use {"city": "it\'s \\"quoted\\" }"} then get_weather({"city": "Oslo"})',
    'get_weather(city="Paris")',
    'functions.get_weather: {"city": "Oslo"} and get_time()',
    DSML,
    SEED,
    ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>",
    "",
]


def stream(text: str, sizes: list[int] | None = None, **options: Any) -> tuple[StreamParser, list[StreamEvent]]:
    finish_reason = options.pop("finish_reason", None)
    parser = StreamParser(TOOLS, **options)
    events: list[StreamEvent] = []
    i = 0
    k = 0
    while i < len(text):
        n = sizes[k % len(sizes)] if sizes else 1
        events += parser.feed(text[i : i + n])
        i += n
        k += 1
    events += parser.close(finish_reason)
    return parser, events


def calls_of(events: list[StreamEvent]) -> list[tuple[str, dict[str, Any], str | None]]:
    return [(e.call.name, e.call.arguments, e.call.id) for e in events if isinstance(e, CallReady)]


def content_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ContentText))


@pytest.mark.parametrize("text", SAMPLES)
def test_outcome_equals_whole_text_parse_one_character_at_a_time(text: str) -> None:
    """Fed one character at a time, the final outcome equals parse_tool_calls on the whole text."""
    parser, events = stream(text)
    whole = parse_tool_calls(text, TOOLS)
    assert parser.outcome == whole
    assert calls_of(events) == [(c.name, c.arguments, c.id) for c in whole.calls]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("text", SAMPLES)
def test_outcome_equals_whole_text_parse_in_random_chunks(text: str, seed: int) -> None:
    """Fed in random chunk sizes, the outcome and the reported calls match the whole-text parse."""
    rng = random.Random(seed)
    parser, events = stream(text, [rng.randint(1, 17) for _ in range(64)])
    whole = parse_tool_calls(text, TOOLS)
    assert parser.outcome == whole
    assert calls_of(events) == [(c.name, c.arguments, c.id) for c in whole.calls]


def test_call_is_reported_when_its_closing_tag_arrives() -> None:
    """CallReady comes with the delta that completes the closing tag, before close()."""
    parser = StreamParser(TOOLS)
    assert parser.feed("Checking. ") == (ContentText("Checking. "),)
    assert parser.feed(HERMES[:-1]) == ()
    events = parser.feed(">")
    assert [
        (type(e).__name__, e.call.name, e.call.arguments, e.call.id) for e in events if isinstance(e, CallReady)
    ] == [("CallReady", "get_weather", {"city": "Paris"}, "call_0")]
    assert parser.outcome is None


def test_possible_call_prefixes_are_held_back_until_resolved() -> None:
    """``<tool``, ``[TOOL_``, ``{"na`` and a partial tool name are held; prose-only resolutions are released."""
    parser = StreamParser(TOOLS)
    assert parser.feed("Hi <tool") == (ContentText("Hi "),)
    assert parser.feed("kit> ok") == (ContentText("<toolkit>"), ContentText(" ok"))
    assert parser.feed(" [TOOL_") == (ContentText(" "),)
    assert parser.feed("BOX] and get_wea") == (ContentText("[TOOL_BOX] and "),)
    assert parser.feed("ther is nice") == (ContentText("get_weather is nice"),)
    assert parser.feed(' {"na') == (ContentText(" "),)
    assert parser.feed('me": 1}') == (ContentText('{"name": 1}'),)
    assert parser.close() == ()


def test_a_call_at_the_very_start_is_held_and_reported_at_close() -> None:
    """A bare python call that starts the output is held from its first character and reported at close.

    Whether a bare call stands alone or in prose shows only in the whole text (``parsing.earned``), so it is not
    reported when its parenthesis closes.
    """
    parser = StreamParser(TOOLS)
    assert [parser.feed(ch) for ch in 'get_weather(city="Paris"'] == [() for _ in range(24)]
    assert not any(isinstance(e, CallReady) for e in parser.feed(")"))
    events = parser.close()
    assert [(e.call.name, e.call.arguments) for e in events if isinstance(e, CallReady)] == [
        ("get_weather", {"city": "Paris"})
    ]


def test_a_delimited_call_after_a_negation_is_not_reported_early() -> None:
    """A <tool_call> block that the prose before it negates is never reported, early or at close."""
    parser = StreamParser(TOOLS)
    events = parser.feed(f"Never send {HERMES} to anyone.")
    events += parser.close()
    assert not any(isinstance(e, CallReady) for e in events)
    assert parser.outcome is not None and parser.outcome.calls == ()


def test_content_events_are_exactly_the_text_outside_calls() -> None:
    """The shown content is the text around the calls, nothing of the call markup."""
    _, events = stream(f"Hello there. {HERMES} Bye.")
    assert content_of(events) == "Hello there.  Bye."
    _, events = stream('Let me call get_weather(city="Paris") now.')
    assert content_of(events) == "Let me call  now."


def test_reasoning_text_and_its_end_are_reported_with_a_timestamp() -> None:
    """Reasoning text streams as ReasoningText; the end marker gives ReasoningEnded with a monotonic time."""
    before = time.monotonic()
    parser, events = stream("<think>Let me think.</think>The answer.")
    after = time.monotonic()
    assert "".join(e.text for e in events if isinstance(e, ReasoningText)) == "Let me think."
    ended = [e for e in events if isinstance(e, ReasoningEnded)]
    assert len(ended) == 1
    assert before <= ended[0].t <= after
    assert content_of(events) == "The answer."
    assert parser.outcome is not None
    assert parser.outcome.reasoning == "Let me think."


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("I am thinking</think>Done.", {"reasoning_open": True}),
        ("[THINK]Hmm.[/THINK]Done.", {}),
        ("<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|return|>", {}),
    ],
)
def test_each_reasoning_dialect_ends_reasoning(text: str, options: dict[str, Any]) -> None:
    """``</think>`` after an opened prompt, ``[/THINK]`` and harmony's analysis end each give ReasoningEnded."""
    parser, events = stream(text, **options)
    kinds = [type(e).__name__ for e in events if not isinstance(e, ReasoningText | ContentText)]
    assert kinds == ["ReasoningEnded"]
    assert content_of(events) == "Done."
    assert parser.outcome == parse_tool_calls(text, TOOLS, **options)


def test_call_only_in_reasoning_is_reported_at_close() -> None:
    """A call written only inside the reasoning is reported at close, flagged in_reasoning."""
    parser = StreamParser(TOOLS)
    events = parser.feed('<think>get_weather(city="Rome")</think>')
    assert not any(isinstance(e, CallReady) for e in events)
    closing = parser.close()
    assert [(e.call.name, e.call.arguments, sorted(e.call.flags)) for e in closing if isinstance(e, CallReady)] == [
        ("get_weather", {"city": "Rome"}, ["in_reasoning"])
    ]


def test_truncated_output_with_finish_reason_length() -> None:
    """A call cut off at the end gives no CallReady and the same Truncated outcome as the whole-text parse."""
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    parser, events = stream(text, finish_reason="length")
    whole = parse_tool_calls(text, TOOLS, finish_reason="length")
    assert parser.outcome == whole
    assert [c.bucket for c in whole.candidates] == ["Truncated"]
    assert calls_of(events) == []


def test_feed_after_close_is_an_error() -> None:
    """Feeding a closed parser raises RuntimeError naming the fix; closing twice gives nothing."""
    parser = StreamParser(TOOLS)
    parser.close()
    assert parser.close() == ()
    with pytest.raises(RuntimeError, match="start a new StreamParser"):
        parser.feed("more")


def test_large_and_deep_inputs_stream_without_error() -> None:
    """1 MB of prose with one call, and 10,000 open brackets, stream in chunks and close cleanly."""
    text = "word " * 200_000 + HERMES
    parser, events = stream(text, [4096])
    assert calls_of(events) == [("get_weather", {"city": "Paris"}, "call_0")]
    assert parser.outcome == parse_tool_calls(text, TOOLS)
    deep = "{" * 10_000 + "]" * 10_000
    parser, _ = stream(deep, [512])
    assert parser.outcome == parse_tool_calls(deep, TOOLS)


@pytest.mark.parametrize(
    "text",
    [
        "<|channel|>" + "a" * 300 + "<|constrain|>" * 40 + "x" * 100_000,
        "<|start|>" + "b" * 70 + "<|start|>" * 20_000,
        "<" + " \t" * 50_000 + "tool_call",
        "[" + " " * 9 + "x" * 80 + "(" * 10_000,
        ("get_weather " * 20_000) + "get_weather" + " " * 5 + ":" + " " * 5,
        "<" + "a" * 31 + "|" + "<a" * 30_000,
    ],
    ids=["harmony", "starts", "tag_spaces", "list_word", "names", "tags"],
)
def test_trigger_search_stays_linear_on_adversarial_text(text: str) -> None:
    """Texts built against each trigger alternative stream and close cleanly, and what is held back stays short.

    The held text is searched again at each delta, so a held prefix that could grow without bound (as "<"
    followed by spaces once did) would make one-character streaming quadratic.
    """
    for sizes in ([len(text)], [4096]):
        parser, _ = stream(text, sizes)
        assert parser.outcome == parse_tool_calls(text, TOOLS)
    parser = StreamParser(TOOLS)
    longest = 0
    for char in text:
        parser.feed(char)
        longest = max(longest, len(parser._pending))
    parser.close()
    assert longest <= 400  # the longest trigger alternative (a harmony header) is about 350 characters
    assert parser.outcome == parse_tool_calls(text, TOOLS)


_PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    'get_weather(city="Rome")',
    "get_time()",
    "[TOOL_CALLS]",
    "```json\n",
    "```",
    "<|channel|>analysis<|message|>",
    "<|end|>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "\\",
    "<",
    ">",
    " ",
    "\n",
    "word",
    "get_wea",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=30).map("".join), st.lists(st.integers(1, 9), min_size=1, max_size=8)
)
def test_any_text_in_any_chunks_gives_the_whole_text_outcome(text: str, sizes: list[int]) -> None:
    """For arbitrary call-like text and chunking, the outcome equals the whole-text parse and nothing raises."""
    parser, events = stream(text, sizes)
    assert parser.outcome == parse_tool_calls(text, TOOLS)
    shown = "".join(e.text for e in events if isinstance(e, ContentText | ReasoningText))
    assert len(shown) <= len(text)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.integers(1, 40))
def test_arbitrary_unicode_streams_without_error(text: str, size: int) -> None:
    """Any text in any fixed chunk size streams, closes, and gives the whole-text outcome."""
    parser, _ = stream(text, [size])
    assert parser.outcome == parse_tool_calls(text, TOOLS)


def test_one_character_plain_text_is_given_out_in_gathered_pieces() -> None:
    """Plain content fed one character at a time comes out 32 characters (or up to a newline) per event."""
    parser = StreamParser(TOOLS)
    text = "a" * 40 + "\nbc"
    events = [event for ch in text for event in parser.feed(ch)]
    assert events == [ContentText("a" * 32), ContentText("a" * 8 + "\n")]
    assert parser.close() == (ContentText("bc"),)


def test_gathered_text_is_given_out_before_a_multi_character_delta() -> None:
    """Gathered characters come out, in order, ahead of the next multi-character delta's content."""
    parser = StreamParser(TOOLS)
    assert [parser.feed(ch) for ch in "Hi"] == [(), ()]
    assert parser.feed(" there") == (ContentText("Hi"), ContentText(" there"))


def test_one_character_reasoning_and_call_report_as_before() -> None:
    """One character at a time, reasoning is gathered, ends with ReasoningEnded, and the call comes at its '>'."""
    parser = StreamParser(TOOLS)
    text = f"<think>Check Paris.</think>{HERMES}"
    events = [(i, event) for i, ch in enumerate(text) for event in parser.feed(ch)]
    assert [(i, type(e).__name__) for i, e in events] == [
        (19, "ReasoningText"),
        (26, "ReasoningEnded"),
        (len(text) - 1, "CallReady"),
    ]
    assert events[0][1] == ReasoningText("Check Paris.")
    assert parser.close() == ()


def test_a_broken_closer_prefix_in_reasoning_is_given_back_as_reasoning() -> None:
    """A held '</thin' that breaks off is reasoning text; only the real closer ends the reasoning."""
    parser = StreamParser(TOOLS, reasoning_open=True)
    events = [event for ch in "ok </thinx> </think>" for event in parser.feed(ch)]
    assert [e.text if isinstance(e, ReasoningText) else type(e).__name__ for e in events] == [
        "ok ",
        "</thinx",
        "> ",
        "ReasoningEnded",
    ]
    assert parser.close() == ()


def test_one_character_marker_prefixes_are_held_and_given_back_exactly() -> None:
    """Held '<to' and '<think' prefixes grow one character at a time; a prefix that breaks off is content."""
    parser = StreamParser(TOOLS)
    events = [event for ch in "a <tox> <think>r</think>b" for event in parser.feed(ch)]
    assert [e if not isinstance(e, ReasoningEnded) else "ended" for e in events] == [
        ContentText("a "),
        ContentText("<tox>"),
        ContentText(" "),
        ReasoningText("r"),
        "ended",
    ]
    assert parser.close() == (ContentText("b"),)
    assert parser.outcome == parse_tool_calls("a <tox> <think>r</think>b", TOOLS)


# -- the quick decisions agree with the searches they skip ---------------------------------------------------------

_NAMES = StreamParser(TOOLS)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.from_regex(stream_module._TAG_WORD.pattern, fullmatch=True),
        st.from_regex(stream_module._LIST_WORD.pattern, fullmatch=True),
    )
)
def test_held_tag_and_list_words_are_what_the_trigger_search_holds(text: str) -> None:
    """An unfinished tag name or word after '[' is held whole: the trigger search calls it a partial match at 0."""
    if stream_module._TAG_WORD.fullmatch(text) is None and stream_module._LIST_WORD.fullmatch(text) is None:
        return  # a word character for the re module that the regex package does not count
    m = _NAMES._trigger.search(" " + text, 1, partial=True)
    assert m is not None and m.partial and m.start() == 1


@pytest.mark.parametrize("char", [chr(c) for c in range(1, 0x250)] + ["｜", "\u2028", "😀"])
def test_a_lt_before_a_character_no_trigger_continues_with_starts_nothing(char: str) -> None:
    """'<' followed by a character outside what a trigger continues with is given out at once, as the search says."""
    if char in stream_module._AFTER_LT or char in _NAMES._content_stops:
        return
    m = _NAMES._trigger.search(" <" + char, 1, partial=True)
    assert m is None or (m.partial and m.start() == 3)  # at most an empty partial match at the very end


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"[gf][\w.]{0,14}", fullmatch=True))
def test_a_word_that_only_began_like_a_name_starts_nothing(word: str) -> None:
    """A word that is no prefix of a declared name (nor 'functions.') is content: the search finds no call in it."""
    if word in _NAMES._name_prefixes or stream_module._WORD_RUN.fullmatch(word) is None:
        return
    m = _NAMES._trigger.search(" " + word, 1, partial=True)
    assert m is None or (m.partial and m.start() == len(word) + 1)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="</thinkTHIK[]x>", max_size=24), st.sampled_from(["</think>", "[/THINK]"]))
def test_literal_closer_lookup_equals_the_partial_regex_search(text: str, literal: str) -> None:
    """The reasoning closer found without a regex is what the regex package's partial search finds.

    An empty partial match at the very end holds nothing back, so it counts as no match.
    """
    m = regex.compile(regex.escape(literal)).search(text, partial=True)
    empty_end = m is not None and m.partial and m.start() == len(text)
    expected = None if m is None or empty_end else (m.start(), m.end(), m.partial)
    assert stream_module._find_literal(literal, text) == expected


def test_prefix_steps_lead_through_every_strict_prefix_to_the_marker() -> None:
    """Following the steps from the empty prefix spells each literal; only whole markers are reached as such."""
    literals = ["<tool_call>", "<think>", "get_weather", "get_time"]
    steps = stream_module._prefix_steps(literals)
    for literal in literals:
        following = steps[""]
        for i, char in enumerate(literal[:-1]):
            step = following[char]
            assert (step.text, step.marker) == (literal[: i + 1], False)
            following = step.next
            assert steps[step.text] is following
        last = following.get(literal[-1])
        if literal in stream_module._COMPLETE:
            assert last is not None and (last.text, last.marker) == (literal, True)
        else:
            assert last is None
    assert sorted(steps["<t"]) == ["h", "o"]
    assert sorted(steps["get_"]) == ["t", "w"]


# Names that share letters, are prefixes of one another, hold a dash or a dot, or are one letter long.
_WORD_TOOLS = [
    {"name": name, "parameters": {"type": "object", "properties": {}}}
    for name in ("get", "get_weather", "list_drivers", "list", "my-tool", "a.b", "s", "send_message")
]


def _normalized(events: list[StreamEvent]) -> list[tuple[str, Any]]:
    """The events with neighbouring text events of one kind joined (how text is split into events may vary)."""
    out: list[tuple[str, Any]] = []
    for event in events:
        if isinstance(event, ContentText | ReasoningText):
            kind = type(event).__name__
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + event.text)
            else:
                out.append((kind, event.text))
        elif isinstance(event, CallReady):
            out.append(("call", (event.call.name, event.call.arguments, event.call.id)))
        else:
            out.append(("end", None))
    return out


_WORD_PIECES = [
    *(tool["name"] for tool in _WORD_TOOLS),
    *"getwaherlisdvmy-o.abn_ sfuc(){}:<[`\n9",
    *("ge", "li", "se", "my", "functions.", "()", "{}", " (", ": {", "gets", "lists", "sender"),
    *("get ()", "list_drivers\t()", "s: {}", "send_message {}", "a.b ()", " ()"),
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_WORD_PIECES), max_size=30).map("".join))
def test_words_that_begin_like_names_stream_as_through_the_held_prefix_path(text: str) -> None:
    """Gathering a word while it begins a declared name gives the events of holding it letter by letter.

    The second parser holds every such word as a prefix from its first letter (the path the gathered word falls
    back to), so its events are the reference for the text, the calls and the outcome.
    """
    parser, reference = StreamParser(_WORD_TOOLS), StreamParser(_WORD_TOOLS)
    reference._words = None
    events: list[StreamEvent] = []
    expected: list[StreamEvent] = []
    for char in text:
        events += parser.feed(char)
        expected += reference.feed(char)
    events += parser.close()
    expected += reference.close()
    assert _normalized(events) == _normalized(expected)
    assert parser.outcome == reference.outcome == parse_tool_calls(text, _WORD_TOOLS)


@pytest.mark.parametrize("size", [1, 2, 5])
@pytest.mark.parametrize(
    "text",
    [
        "Send the list of drivers; get the weather (later) and list_drivers() then get_weather(city='Oslo').",
        "a.b(x=1) my-tool(y=2) s(3) gets getter list_ lists my-toolbox functions.get() functions.gett",
        'get\nget_weather:{} list {} send_message {"to": "x"} get_weather[ get_weather`',
    ],
)
def test_prose_with_many_names_streams_to_the_whole_text_outcome(text: str, size: int) -> None:
    """Words that begin like declared names, and the calls among them: the same outcome as the whole-text parse."""
    parser = StreamParser(_WORD_TOOLS)
    events: list[StreamEvent] = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i : i + size])
    events += parser.close()
    whole = parse_tool_calls(text, _WORD_TOOLS)
    assert parser.outcome == whole
    assert [(c.name, c.arguments) for c in whole.calls] == [
        (e.call.name, e.call.arguments) for e in events if isinstance(e, CallReady)
    ]
    assert whole.candidates, "each text holds call-like text (calls, or calls in mid-prose kept as Ambiguous)"


@pytest.mark.parametrize(
    ("text", "closer", "content", "reasoning"),
    [
        (DSML, "</｜DSML｜function_calls>", "Checking.\n\nDone.", ""),
        (SEED, "</seed:tool_call>", "Sure.", "Weather for Paris."),
    ],
)
def test_dsml_and_seed_calls_are_reported_when_their_closer_arrives(
    text: str, closer: str, content: str, reasoning: str
) -> None:
    """A DSML or Seed-OSS call is reported with the delta that completes its closer; its markup is never content."""
    parser = StreamParser(TOOLS)
    cut = text.index(closer) + len(closer)
    before = [e for ch in text[: cut - 1] for e in parser.feed(ch)]
    assert calls_of(before) == []
    at_closer = list(parser.feed(text[cut - 1]))
    assert calls_of(at_closer) == [("get_weather", {"city": "Paris"}, "call_0")]
    events = before + at_closer + [e for ch in text[cut:] for e in parser.feed(ch)] + list(parser.close())
    assert content_of(events) == content
    assert "".join(e.text for e in events if isinstance(e, ReasoningText)) == reasoning


def test_reasoning_handed_over_apart_reaches_the_outcome_as_reasoning() -> None:
    """feed_reasoning gives reasoning back as text, never reads it as content; close() parses it as reasoning=."""
    parser = StreamParser(TOOLS)
    events = [*parser.feed_reasoning("I will call "), *parser.feed_reasoning(HERMES), *parser.feed_reasoning("")]
    assert events == [ReasoningText("I will call "), ReasoningText(HERMES)]
    events = [*parser.feed("Let me check."), *parser.close("stop")]
    assert parser.outcome == parse_tool_calls("Let me check.", TOOLS, reasoning=f"I will call {HERMES}")
    assert parser.outcome is not None
    assert [(c.name, c.arguments, sorted(c.flags)) for c in parser.outcome.calls] == [
        ("get_weather", {"city": "Paris"}, ["in_reasoning"])
    ]
    assert events == [ContentText("Let me check."), CallReady(parser.outcome.calls[0])]  # reported at close
    with pytest.raises(RuntimeError, match=r"feed_reasoning\(\) after close\(\)"):
        parser.feed_reasoning("more")
