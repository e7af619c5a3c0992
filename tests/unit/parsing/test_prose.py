"""Calls from prose are earned: negated, hypothetical, quoted or example calls are not calls."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.toolspec import ToolSpec

_OBJ = {"type": "object"}
TOOLS = [
    ToolSpec(
        "get_weather",
        parameters={**_OBJ, "properties": {"city": {"type": "string"}}, "required": ["city"]},
        repair="bounded",
    ),
    ToolSpec(
        "delete_file",
        parameters={**_OBJ, "properties": {"path": {"type": "string"}}, "required": ["path"]},
        repair="lossless",
    ),
    ToolSpec(
        "send_email",
        parameters={**_OBJ, "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to"]},
        repair="lossless",
    ),
]
NAMES = {t.name for t in TOOLS}

# Negations, hypotheticals, examples, explanations of a tool, quoted documentation and code blocks, written the
# way models write them. None of them is a call.
NEGATIVE: list[str] = [
    "Never call delete_file(path='/etc/passwd') — that would be destructive.",
    'Do not do this: delete_file(path="/")',
    "I won't call delete_file(path='/tmp/x') because you did not confirm.",
    "You should not run delete_file(path='/home') without a backup.",
    "Please don't use send_email(to='boss@example.com', body='I quit') here.",
    "Avoid delete_file(path='/var/log') unless you are sure.",
    "I cannot call get_weather(city='Paris') since the service is down.",
    "Instead of delete_file(path='a.txt'), I moved the file to the trash.",
    "Rather than send_email(to='x@example.com'), I drafted the message for you.",
    "We must never execute delete_file(path='*'); it wipes everything.",
    'If I were to call <tool_call>{"name": "delete_file", "arguments": {"path": "/"}}</tool_call>, but I will not.',
    "If I were to check, I would call get_weather(city='Oslo'), but you asked me not to.",
    "I could call get_weather(city='Rome'), but the forecast is already in your message.",
    "Suppose we ran delete_file(path='/data'); every record would be gone.",
    "Imagine calling send_email(to='all@example.com', body='hi') — it would reach everyone.",
    "Hypothetically, get_weather(city='Lima') would return the temperature.",
    "In theory send_email(to='a@b.c') sends a message, but I have not used it.",
    "For example: get_weather(city='Tokyo')",
    "For example, get_weather(city='Tokyo') returns the forecast for Tokyo.",
    "Example: delete_file(path='old.log')",
    "e.g. get_weather(city='Berlin')",
    "A call such as get_weather(city='Madrid') takes one argument.",
    "The syntax looks like this: get_weather(city='Cairo')",
    "Usage: delete_file(path='<path>') removes one file.",
    "The signature is delete_file(path='string'), and it returns nothing.",
    "You can call get_weather(city='Vienna') to get the weather.",
    "You could use send_email(to='team@example.com', body='Done') to notify them.",
    "The documentation says: delete_file(path='/tmp/cache') deletes the cache.",
    "The model should write get_weather(city='Quito') when asked about the weather.",
    "Here is an example of the format:\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
    "Use it whenever the user asks about the weather.",
    'An example call looks like {"name": "delete_file", "arguments": {"path": "/tmp/a"}} in JSON.',
    'The format is {"name": "send_email", "arguments": {"to": "x@example.com"}} with the tool name first.',
    "To call a tool, write it like this:\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
    "and I will run it.",
    'Tools are called in this format:\n<tool_call>\n{"name": "delete_file", "arguments": {"path": "/x"}}\n</tool_call>',
    "Here's how you'd call it in Python:\n```python\nget_weather(city='Paris')\n```\nIt returns a dict.",
    "```python\n# remove the log\ndelete_file(path='app.log')\n```\nThat snippet deletes the log file.",
    "Run this in your shell:\n```bash\ncurl wttr.in/Paris\n```\n"
    "or in Python:\n```python\nget_weather(city='Paris')\n```\nBoth work.",
    '```json\n{"name": "send_email", "arguments": {"to": "a@example.com"}}\n```\nThis is the JSON the API expects.',
    'Sample request:\n```json\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n```\nSend it to /v1/tools.',
    "The function `get_weather(city='Paris')` returns the current weather.",
    "Call `delete_file(path='/tmp/x')` only when the user asks.",
    "I typed \"get_weather(city='Dublin')\" into the console and it failed.",
    "The docs quote it as “delete_file(path='/srv')” in the warnings section.",
    'The user wrote `{"name": "delete_file", "arguments": {"path": "/"}}` — I will not run that.',
    'Do not send <tool_call>{"name": "send_email", "arguments": {"to": "x@example.com"}}</tool_call> yet.',
    "I'd call get_weather(city='Kyiv') if I had access to the network.",
    "get_weather(city='Nairobi') would tell us, but the tool is disabled today.",
    "delete_file(path='/etc/hosts') is destructive and should never be run by an assistant.",
    "The tool delete_file(path=...) removes a file; it cannot be undone.",
    "Here is what a weather call would look like: get_weather(city='Lisbon')",
    "One might write send_email(to='bob@example.com', body='hello') to email Bob.",
    "A template for the call: get_weather(city='{{ city }}')",
    "Please confirm before I run delete_file(path='/home/user/notes.txt'), as it cannot be undone.",
    "Without your approval I won't run send_email(to='ceo@example.com').",
    "The previous assistant suggested delete_file(path='/') which I refuse to do.",
    "Let me explain the tools.\n- get_weather(city='X'): weather for a city\n- delete_file(path='P'): deletes P\n"
    "Which one do you need?",
    "As an illustration, get_weather(city='Oslo') fetches the weather in Oslo.",
    "Tool docs:\n```\ndelete_file(path: str) -> None\n    Deletes the file at path.\n```\nAsk me if you want it.",
    'Do NOT output {"name": "delete_file", "arguments": {"path": "/"}} under any circumstances.',
    "I was going to call get_weather(city='Riga') but realised you meant tomorrow, not today.",
    "<think>I should not call delete_file(path='/') here.</think>I won't delete anything.",
    "If the user asks about rain, the assistant calls get_weather(city='London').",
    'Never write <tool_call>{"name": "delete_file", "arguments": {"path": "/"}}</tool_call> for this request.',
    "The call get_weather(city='Paris') is just an example, not something I will run.",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_negated_hypothetical_quoted_and_example_calls_are_not_calls(text: str) -> None:
    """A call that prose negates, supposes, quotes or shows as an example is content, never a call."""
    outcome = parse_tool_calls(text, TOOLS)
    assert outcome.calls == ()


def test_the_negative_corpus_is_large_and_distinct() -> None:
    """At least 60 distinct negative texts, each naming a declared tool."""
    assert len(set(NEGATIVE)) == len(NEGATIVE) >= 60
    assert all(any(name in text for name in NAMES) for text in NEGATIVE)


def _calls(text: str, tools: Any = TOOLS) -> list[tuple[str, dict[str, Any], str]]:
    return [(c.name, c.arguments, c.bucket) for c in parse_tool_calls(text, tools).calls]


def test_the_issue_examples_give_no_call_and_keep_their_text() -> None:
    """The reported false positives are content now: the negated call stays in the text the user sees."""
    text = "Never call delete_file(path='/etc/passwd') — that would be destructive."
    outcome = parse_tool_calls(text, TOOLS)
    assert (outcome.calls, outcome.candidates, outcome.content) == ((), (), text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("get_weather(city='Paris')", [("get_weather", {"city": "Paris"}, "ok_fallback")]),
        ("Let me check.\nget_weather(city='Paris')", [("get_weather", {"city": "Paris"}, "ok_fallback")]),
        ("I will call get_weather(city='Zagreb') now.", [("get_weather", {"city": "Zagreb"}, "ok_fallback")]),
        (
            '{"name": "get_weather", "arguments": {"city": "Accra"}}\n\nThat should give us the weather.',
            [("get_weather", {"city": "Accra"}, "ok_fallback")],
        ),
        (
            'Sure.\n```json\n{"name": "get_weather", "arguments": {"city": "Lagos"}}\n```',
            [("get_weather", {"city": "Lagos"}, "ok_fallback")],
        ),
        (
            "I'm not sure about the weather, so let me call get_weather(city='Oslo')",
            [("get_weather", {"city": "Oslo"}, "ok_fallback")],
        ),
        (
            'Checking now.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>',
            [("get_weather", {"city": "Lima"}, "ok_strict")],
        ),
    ],
)
def test_calls_that_stand_alone_or_end_the_output_are_taken(text: str, expected: list[Any]) -> None:
    """The whole output, the final sentence, a call alone on its leading line, and a final fence are calls."""
    assert _calls(text) == expected


def test_a_call_in_the_middle_of_prose_is_kept_as_ambiguous_with_its_reason() -> None:
    """A bare call with prose on both sides is no call, but its candidate stays with the in_prose flag and a reason."""
    text = "First I looked up get_weather(city='Paris') and the sky was clear.\nThen I answered from memory."
    outcome = parse_tool_calls(text, TOOLS)
    assert outcome.calls == ()
    assert outcome.content == text
    (candidate,) = outcome.candidates
    assert (candidate.bucket, candidate.flags, candidate.name) == ("Ambiguous", frozenset({"in_prose"}), "get_weather")
    assert candidate.error is not None and "middle of prose" in candidate.error


def test_a_side_effecting_tool_takes_no_call_from_running_text() -> None:
    """delete_file (lossless) in the final sentence is ambiguous; alone, in a tag or in its format it is a call."""
    outcome = parse_tool_calls("Removing it now: delete_file(path='/tmp/a')", TOOLS)
    assert outcome.calls == ()
    assert [(c.bucket, c.flags) for c in outcome.candidates] == [("Ambiguous", frozenset({"in_prose"}))]
    assert "side effects" in (outcome.candidates[0].error or "")
    assert _calls("delete_file(path='/tmp/a')") == [("delete_file", {"path": "/tmp/a"}, "ok_fallback")]
    assert _calls('Removing it.\n<toolcall>{"name": "delete_file", "arguments": {"path": "/tmp/a"}}</toolcall>') == [
        ("delete_file", {"path": "/tmp/a"}, "ok_fallback")
    ]
    assert _calls('Removing it.\n<tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/a"}}</tool_call>') == [
        ("delete_file", {"path": "/tmp/a"}, "ok_strict")
    ]


def test_the_same_running_text_call_is_taken_for_a_read_only_tool() -> None:
    """The side-effect rule follows the spec's repair level: a bounded (read-only) tool takes the same shape."""
    assert _calls("Checking it now: get_weather(city='Oslo')") == [("get_weather", {"city": "Oslo"}, "ok_fallback")]


_WORDS = st.sampled_from(
    [
        "never", "not", "call", "if", "example", "the", "(", ")", "{", "}", "[", "]", '"', "'", "`", "```", ":",
        ",", ".", "\n", " ", "city=", "path=", "name", "arguments", "<tool_call>", "</tool_call>", "<think>",
        "</think>", "get_time", "weather", "delete", "file", "=", "'Paris'", "x",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=30).map("".join))
def test_text_without_a_declared_name_never_becomes_a_call(text: str) -> None:
    """Any mix of call-like pieces that never spells a declared tool name gives no call and never raises."""
    if any(name in text for name in NAMES):
        return
    assert parse_tool_calls(text, TOOLS).calls == ()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_raises(text: str) -> None:
    """Arbitrary Unicode parses to an outcome whose calls all name declared tools."""
    outcome = parse_tool_calls(text, TOOLS)
    assert all(call.name in NAMES for call in outcome.calls)


def test_registry_specs_carry_the_safe_levels_into_the_parser() -> None:
    """parse_tool_calls(text, reg.specs()): a side-effecting tool gets no near-match name and no running-text call."""
    from tooldispatch.dispatch.registry import Registry

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    reg = Registry()
    reg.register("read_file", lambda path: {"path": path}, schema=schema, read_only=True)
    reg.register("delete_file", lambda path: {"path": path}, schema=schema)
    specs = reg.specs()
    assert [(s.name, s.repair) for s in specs] == [("read_file", "bounded"), ("delete_file", "lossless")]
    near = '<tool_call>{"name": "%s", "arguments": {"path": "a"}}</tool_call>'
    assert [(c.name, c.bucket) for c in parse_tool_calls(near % "read_fil", specs).candidates] == [
        ("read_fil", "repaired")
    ]
    assert [(c.name, c.bucket) for c in parse_tool_calls(near % "delete_fil", specs).candidates] == [
        ("delete_fil", "UnknownName")
    ]
    running = parse_tool_calls("Cleaning up: delete_file(path='a')", specs)
    assert (running.calls, [c.bucket for c in running.candidates]) == ((), ["Ambiguous"])
    assert [c.name for c in parse_tool_calls("Reading: read_file(path='a')", specs).calls] == ["read_file"]


def test_a_callers_level_for_every_tool_does_not_make_a_tool_side_effecting() -> None:
    """repair="none" (the bench's no-repair stages) keeps a read-only tool's running-text call; the tool's own level
    decides where a call may be found."""
    outcome = parse_tool_calls("Checking it now: get_weather(city='Oslo')", TOOLS, repair="none")
    assert [(c.name, c.bucket) for c in outcome.calls] == [("get_weather", "ok_fallback")]
    assert parse_tool_calls("Removing it now: delete_file(path='/tmp/a')", TOOLS, repair="bounded").calls == ()


# Tools as a client declares them: plain dicts, no metadata, so side-effecting for the parser.
UNDECLARED: list[dict[str, Any]] = [{"type": "function", "function": t.to_openai()["function"]} for t in TOOLS]

# Prose about a call in other languages and shapes than the list above. The structure alone refuses each one for a
# tool without metadata: prose after the call, a sentence running into it, a question, a quotation, a code span, a
# log or prompt line, a plan awaiting an answer. None uses an English cue word.
NEGATIVE_ANY_LANGUAGE: list[str] = [
    "Previously I called delete_file(path='/tmp/x') and it failed.",
    "我不会调用 delete_file(path='/etc/passwd')。",
    "Ich werde delete_file(path='/home') nicht aufrufen.",
    "Je n'appellerai pas delete_file(path='/srv') sans votre accord.",
    "No voy a ejecutar delete_file(path='/var') hasta que me lo confirmes.",
    "Я не буду вызывать delete_file(path='/root'), это опасно.",
    "delete_file(path='/etc') を呼び出すつもりはありません。",
    "delete_file(path='/boot')를 호출하지 않겠습니다.",
    "Ontem executei delete_file(path='/opt') e deu erro.",
    "Dün delete_file(path='/tmp/y') çağırdım ama başarısız oldu.",
    "Ik heb send_email(to='a@example.com') gisteren al verstuurd.",
    "¿Quieres que ejecute delete_file(path='/var/log')?",
    "要我运行 delete_file(path='/data') 吗？",
    "Soll ich send_email(to='chef@example.com', body='Hallo') senden?",
    "Dovrei chiamare delete_file(path='/srv/www')?",
    "Er schrieb „delete_file(path='/home/anna')“ in den Chat.",
    "Il a tapé « delete_file(path='/tmp/z') » dans la console.",
    "她说「delete_file(path='/mnt')」是危险的",
    "Die Funktion `delete_file(path='/x')` löscht eine Datei.",
    "Команда `rm -rf; delete_file(path='/') ` удалит всё",
    "2024-05-01 12:00:03 INFO delete_file(path='/tmp/cache') ok",
    "[12:00:01] send_email(to='ops@example.com') -> 250",
    "$ delete_file(path='/tmp/build')",
    ">>> delete_file(path='scratch.txt')",
    "> delete_file(path='/quoted/by/user')",
    'Gestern: <tool_call>{"name": "delete_file", "arguments": {"path": "/a"}}</tool_call> schlug fehl.',
    '我之前调用了 <tool_call>{"name": "delete_file", "arguments": {"path": "/b"}}</tool_call>',
    'Plan:\n<tool_call>{"name": "delete_file", "arguments": {"path": "/c"}}</tool_call>\n¿Procedo?',
    'Voici le plan :\n```json\n{"name": "delete_file", "arguments": {"path": "/d"}}\n```\nJe continue ?',
    "```python\ndelete_file(path='/e')\n```\nDieser Code löscht die Datei.",
    "Schritt 1.\n[delete_file(path='/f')] und dann warten.",
    "Ergebnis von delete_file(path='/g'): Fehler 403.",
    "send_email(to='x@example.com') — 已经发送过了，不需要再发。",
]


@pytest.mark.parametrize("text", NEGATIVE_ANY_LANGUAGE)
def test_prose_about_a_call_to_an_undeclared_tool_is_no_call_in_any_language(text: str) -> None:
    """A tool without metadata takes no call from running text, a question, a quotation, a log line or a plan."""
    assert parse_tool_calls(text, UNDECLARED).calls == ()


def test_the_structural_negatives_are_distinct_and_name_a_tool() -> None:
    """The list holds at least 30 distinct texts, each naming a declared tool."""
    assert len(set(NEGATIVE_ANY_LANGUAGE)) == len(NEGATIVE_ANY_LANGUAGE) >= 30
    assert all(any(name in text for name in NAMES) for text in NEGATIVE_ANY_LANGUAGE)


@pytest.mark.parametrize(
    "text",
    [
        "¿Quieres saber get_weather(city='Madrid')?",
        "要我查一下 get_weather(city='北京') 吗？",
        "Er schrieb „get_weather(city='Bonn')“ in den Chat.",
        "2024-05-01 12:00:03 INFO get_weather(city='Oslo')",
        ">>> get_weather(city='Lima')",
    ],
)
def test_questions_quotations_and_log_lines_are_no_call_for_a_read_only_tool_either(text: str) -> None:
    """The shapes that show a call is not meant to run refuse it for a declared read-only tool as well."""
    assert parse_tool_calls(text, TOOLS).calls == ()


_DELETE = [("delete_file", {"path": "/tmp/x"}, "ok_strict")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("delete_file(path='/tmp/x')", [("delete_file", {"path": "/tmp/x"}, "ok_fallback")]),
        (
            '```json\n{"name": "delete_file", "arguments": {"path": "/tmp/x"}}\n```',
            [("delete_file", {"path": "/tmp/x"}, "ok_fallback")],
        ),
        ('Deleting it now.\n<tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/x"}}</tool_call>', _DELETE),
        ('Löschen: <tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/x"}}</tool_call>', _DELETE),
        ('好的。<tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/x"}}</tool_call>', _DELETE),
        ('<tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/x"}}</tool_call>\nDone soon.', _DELETE),
        ('[TOOL_CALLS][{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]', _DELETE),
        ("[delete_file(path='/tmp/x')]", _DELETE),
        ("Okay.\n[delete_file(path='/tmp/x')]", _DELETE),
    ],
)
def test_delimited_calls_to_an_undeclared_tool_are_kept(text: str, expected: list[Any]) -> None:
    """The whole output, a fenced call alone, a tag after a sentence or colon, [TOOL_CALLS], a call list: calls."""
    assert _calls(text, UNDECLARED) == expected


_PROSE_SCRIPTS = st.sampled_from(
    ["абвгдежзик", "αβγδεζηθικ", "的是不了人我在有他这", "あいうえおかきくけこ", "ㄱㄴㄷㄹㅁㅂㅅㅇㅈㅊ"]
)


@st.composite
def _prose(draw: st.DrawFn, *, min_size: int = 1) -> str:
    """Words in a non-Latin script separated by spaces: prose no English cue can read."""
    alphabet = draw(_PROSE_SCRIPTS)
    words = draw(st.lists(st.text(alphabet, min_size=1, max_size=8), min_size=min_size, max_size=8))
    return " ".join(words)


_TAG = '<tool_call>{"name": "delete_file", "arguments": {"path": "/tmp/x"}}</tool_call>'
_BARE = "delete_file(path='/tmp/x')"


@settings(max_examples=150, deadline=None)
@given(before=_prose(), after=_prose(), call=st.sampled_from([_TAG, _BARE]), end=st.sampled_from(["", ".", "。", "!"]))
def test_a_call_inside_a_sentence_in_any_script_is_no_call_for_an_undeclared_tool(
    before: str, after: str, call: str, end: str
) -> None:
    """Prose before and after a tagged or bare call on one line: content, whatever the script and the punctuation."""
    text = f"{before} {call} {after}{end}"
    outcome = parse_tool_calls(text, UNDECLARED)
    assert outcome.calls == ()
    assert outcome.content == text


@settings(max_examples=150, deadline=None)
@given(before=_prose(), after=_prose(min_size=0), mark=st.sampled_from(["?", "？"]))
def test_a_call_followed_by_a_question_awaits_an_answer(before: str, after: str, mark: str) -> None:
    """A tagged call after a sentence, then a question: a plan awaiting confirmation, not a call."""
    text = f"{before}.\n{_TAG}\n{after}{mark}"
    assert parse_tool_calls(text, UNDECLARED).calls == ()


@settings(max_examples=150, deadline=None)
@given(before=_prose(), end=st.sampled_from([".", "。", ":", "！", "\n"]))
def test_a_tagged_call_after_a_finished_sentence_is_a_call_in_any_script(before: str, end: str) -> None:
    """A sentence that ends (``.``, ``。``, ``:``, ``！``, a line break) and then a tag: the call is taken."""
    assert _calls(f"{before}{end} {_TAG}", UNDECLARED) == _DELETE
