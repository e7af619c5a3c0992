"""Lazy grammars for constrained ``auto``: the call grammar per shape and the trigger patterns that start it."""

from __future__ import annotations

import re

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.models import manifest as manifest_mod
from tooldispatch.models.manifest import load_manifest
from tooldispatch.prompting.grammar import CALL_SHAPES, FORMAT_CALL_SHAPE, lazy_tool_call_grammar
from tooldispatch.toolspec import ToolSpec

WEATHER = ToolSpec(
    "get_weather",
    "",
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]},
)
PLAY = ToolSpec("spotify.play", "", {"type": "object", "properties": {}})
QWEN_SHAPES = ("json_fence", "bare_json")


def _trigger(pattern: str, text: str) -> int | None:
    """Where the grammar takes over when the text generated so far is ``text``, or ``None``.

    llama.cpp searches the pattern (ECMAScript, where ``$`` is only the end of the text) and starts the grammar
    at the first non-empty group; Python's ``\\Z`` is that ``$``.
    """
    assert pattern.endswith("$")
    found = re.search(pattern[:-1] + r"\Z", text)
    return None if found is None else found.start(1)


def _first_fire(pattern: str, output: str) -> tuple[int, int] | None:
    """Feed ``output`` one character at a time: (text length, grammar start) at the first trigger."""
    for end in range(1, len(output) + 1):
        start = _trigger(pattern, output[:end])
        if start is not None:
            return end, start
    return None


def test_lazy_grammar_exact_for_hermes_with_qwen_shapes() -> None:
    """The root admits calls as <tool_call>, as ```json fences or bare, a line apart; JSON whitespace is free."""
    grammar = lazy_tool_call_grammar([WEATHER, PLAY], "hermes", call_shapes=QWEN_SHAPES)
    assert grammar.text == (
        'root ::= shaped-call ("\\n"{1,2} shaped-call)*\n'
        'get-weather-args ::= "{" ws "\\"city\\"" ws ":" ws string (ws "," ws "\\"days\\"" ws ":" ws integer)? '
        'ws "}"\n'
        'call-get-weather ::= "{" ws "\\"name\\"" ws ":" ws "\\"get_weather\\"" ws "," ws "\\"arguments\\"" ws ":" '
        'ws get-weather-args ws "}"\n'
        'call-spotify-play ::= "{" ws "\\"name\\"" ws ":" ws "\\"spotify.play\\"" ws "," ws "\\"arguments\\"" ws ":" '
        'ws "{" ws "}" ws "}"\n'
        "call ::= call-get-weather | call-spotify-play\n"
        'shaped-call ::= "<tool_call>" ws call ws "</tool_call>" | "```" "json"? "\\n" ws call ws "```" | call\n'
        'string ::= "\\"" char{0,64} "\\""\n'
        'char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] '
        "[0-9a-fA-F])\n"
        'integer ::= "-"? ("0" | [1-9] [0-9]*)\n'
        'ws ::= | " " | "\\n" [ \\t]{0,20}\n'
    )
    assert len(grammar.trigger_patterns) == 1


def test_json_format_binds_its_own_bare_object_with_parameters() -> None:
    """Llama-3 JSON: the format's own shape is the bare object, with the ``parameters`` key."""
    grammar = lazy_tool_call_grammar([PLAY], "json")
    assert grammar.text.splitlines()[:2] == [
        'root ::= shaped-call ("\\n"{1,2} shaped-call)*',
        'call-spotify-play ::= "{" ws "\\"name\\"" ws ":" ws "\\"spotify.play\\"" ws "," ws "\\"parameters\\"" ws ":" '
        'ws "{" ws "}" ws "}"',
    ]
    output = '{"name": "spotify.play", "parameters": {}}'
    assert _first_fire(grammar.trigger_patterns[0], output) == (len('{"name": "spotify.play"'), 0)


def test_fenced_pretty_call_triggers_at_the_token_closing_the_name() -> None:
    """Qwen's fenced, indented call binds from the fence once the offered name is closed."""
    (pattern,) = lazy_tool_call_grammar([WEATHER], "hermes", call_shapes=QWEN_SHAPES).trigger_patterns
    output = '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```'
    assert _first_fire(pattern, output) == (len('```json\n{\n  "name": "get_weather"'), 0)
    # A token that carries the closing quote and what the grammar takes next also fires, from the fence.
    assert _trigger(pattern, '```json\n{\n  "name": "get_weather",\n  "arg') == 0
    assert _trigger(pattern, '```\n{"name": "get_weather", "arguments": {') == 0


def test_bare_and_tagged_calls_after_prose_bind_from_the_call() -> None:
    """A bare object or a <tool_call> after an answer binds from its own first character."""
    (pattern,) = lazy_tool_call_grammar([WEATHER], "hermes", call_shapes=QWEN_SHAPES).trigger_patterns
    assert _trigger(pattern, 'Let me check. {"name": "get_weather",') == len("Let me check. ")
    assert _trigger(pattern, 'Checking.\n<tool_call>\n{"name": "get_weather"') == len("Checking.\n")


def test_no_trigger_without_an_offered_name_or_past_what_the_grammar_takes() -> None:
    """Unoffered or unfinished names, other JSON, prose and text the grammar would refuse never trigger."""
    (pattern,) = lazy_tool_call_grammar([WEATHER, PLAY], "hermes", call_shapes=QWEN_SHAPES).trigger_patterns
    refused = [
        '```json\n{\n  "name": "get_time",\n',
        '{"name": "get_weath',
        '{"name": "spotify_play"',
        '```json\n{"city": "Paris"}\n```',
        "The weather in Paris is sunny.",
        '{"name": "get_weather"}',
        '{"name": "get_weather", "parameters": {',
        '{"name": "get_weather",   "arguments": {',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ]
    assert [_trigger(pattern, text) for text in refused] == [None] * len(refused)


def test_names_are_escaped_for_the_regex() -> None:
    """A dot in a tool name matches only a dot."""
    (pattern,) = lazy_tool_call_grammar([PLAY], "hermes", call_shapes=QWEN_SHAPES).trigger_patterns
    assert _trigger(pattern, '{"name": "spotify.play",') == 0
    assert _trigger(pattern, '{"name": "spotifyXplay",') is None


def test_formats_without_a_json_object_call_and_unknown_shapes_are_refused() -> None:
    """List and Python formats have no lazy grammar; unknown shapes and no tools are errors that say so."""
    with pytest.raises(ConfigError, match="tool format 'pythonic' has no lazy grammar; call shapes need one of"):
        lazy_tool_call_grammar([WEATHER], "pythonic", call_shapes=QWEN_SHAPES)
    with pytest.raises(ConfigError, match="unknown call shape 'yaml'; choose among tool_call_tag, json_fence"):
        lazy_tool_call_grammar([WEATHER], "hermes", call_shapes=("yaml",))
    with pytest.raises(ConfigError, match="needs at least one tool"):
        lazy_tool_call_grammar([], "hermes", call_shapes=QWEN_SHAPES)


def test_manifest_shapes_and_formats_agree_with_the_grammar_tables() -> None:
    """Every shape a manifest may declare has grammar data; the formats it may extend have an own shape."""
    assert set(manifest_mod.CALL_SHAPES) <= set(CALL_SHAPES)
    assert tuple(FORMAT_CALL_SHAPE) == manifest_mod.CALL_SHAPE_FORMATS


def test_qwen25_coder_manifests_declare_fences_and_bare_json() -> None:
    """Both packaged Qwen2.5-Coder sizes declare the shapes their models write; SmolLM2 declares none."""
    shapes = {
        name: load_manifest(name).call_shapes
        for name in ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct", "smollm2-135m-instruct")
    }
    assert shapes == {
        "qwen2.5-coder-0.5b-instruct": QWEN_SHAPES,
        "qwen2.5-coder-1.5b-instruct": QWEN_SHAPES,
        "smollm2-135m-instruct": (),
    }


def test_manifest_call_shapes_are_checked() -> None:
    """An unknown shape, or shapes on a format whose calls are not single JSON objects, name the fix."""
    base = {"id": "m", "family": "f", "license": "MIT"}
    with pytest.raises(ConfigError, match="'call_shapes' may list json_fence, bare_json, got 'yaml'"):
        manifest_mod.parse_manifest({**base, "tool_format": "hermes", "call_shapes": ["yaml"]})
    with pytest.raises(ConfigError, match="'call_shapes' needs a tool format whose calls are JSON objects"):
        manifest_mod.parse_manifest({**base, "tool_format": "pythonic", "call_shapes": ["bare_json"]})
