"""Each tool format is declared once (``Format`` in its module); the registries are built from the declarations."""

from __future__ import annotations

import re

import pytest

from tooldispatch.parsing import _markers, _stream_tables, _typed_values
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.finders import select_formats
from tooldispatch.parsing.formats import (
    DECLARED,
    FORMATS,
    OTHER_NAMES,
    PROMPT_FORMATS,
    _by_name,
    _other_names,
    _prompt_formats,
    qwen3_coder,
    seed_oss,
)
from tooldispatch.parsing.formats._format import JSON_START, PY_LIST, CallGrammar, Format, PromptFormat
from tooldispatch.parsing.formats._prompt import tool_response


def _find_nothing(text: str) -> list[RawCall]:
    return []


TOY = Format(
    name="toy",
    find=_find_nothing,
    markers=("<toy>",),
    stream_openers=(("toy", "<toy>"),),
    stream_closers=(("toy", re.escape("</toy>")),),
    other_names=("toy_v1",),
)


def test_formats_are_the_declarations_in_order() -> None:
    """FORMATS maps each declared name to its declaration, in the tie-break order of DECLARED."""
    assert list(FORMATS) == [
        "hermes", "glm", "qwen3_coder", "seed_oss", "xml_invoke", "mistral", "kimi_k2", "deepseek",
        "deepseek_v32", "harmony", "llama4", "llama3_json", "pythonic", "gemma",
    ]  # fmt: skip
    assert all(FORMATS[f.name] is f for f in DECLARED)


def test_other_names_select_the_formats_declaring_them() -> None:
    """Each other name (vLLM's parser names, the prompt formats) selects the formats that declare it."""
    assert {name: [f.name for f in formats] for name, formats in OTHER_NAMES.items()} == {
        "qwen": ["hermes"],
        "hermes_list": ["hermes"],
        "glm45": ["glm"],
        "glm47": ["glm"],
        "qwen3_xml": ["qwen3_coder"],
        "seed": ["seed_oss"],
        "minimax_m2": ["xml_invoke"],
        "kimi": ["kimi_k2"],
        "deepseek_v3": ["deepseek"],
        "deepseek_v31": ["deepseek"],
        "dsml": ["deepseek_v32"],
        "openai": ["harmony"],
        "gpt_oss": ["harmony"],
        "llama4_pythonic": ["llama4", "pythonic"],
        "llama3": ["llama3_json"],
        "json": ["llama3_json"],
        "gemma_tool_code": ["gemma"],
    }
    assert [f.name for f in select_formats("", "llama4_pythonic")] == ["llama4", "pythonic"]


def test_marker_scan_reads_every_declared_marker() -> None:
    """The marker scan's table holds each format's literal markers; pseudo-markers are found their own way."""
    literal = {m for lead in _markers.LEADS.values() for m in lead}
    for f in DECLARED:
        for marker in (*f.markers, *(f.auto_markers or ())):
            if marker in (PY_LIST, JSON_START):
                continue
            assert marker in literal
            assert marker in _markers.scan_markers(f"text {marker} text")


def test_stream_tables_come_from_the_declarations() -> None:
    """Every declared opener is a group of the trigger search and every declared closer a closing pattern."""
    trigger = re.compile(_stream_tables._STATIC_TRIGGERS, re.VERBOSE)
    for f in DECLARED:
        for kind, _ in f.stream_openers:
            assert kind in trigger.groupindex
        for kind, pattern in f.stream_closers:
            assert _stream_tables._CLOSERS[kind].pattern == pattern
    seed = trigger.fullmatch("<seed:tool_call>")
    assert seed is not None
    assert seed.lastgroup == "seed_call"


def test_typed_value_formats_are_those_declaring_text_values() -> None:
    """The formats whose values are typed by the schema are exactly those that declare ``text_values``."""
    assert {"glm", "qwen3_coder", "seed_oss", "xml_invoke", "deepseek_v32"} == _typed_values.XML_VALUE_FORMATS


def test_seed_oss_reads_qwen3_coder_tags_in_its_own_wrapper() -> None:
    """Seed-OSS's dialect is qwen3-coder's with its own name and wrapper, not a copy of its fields."""
    ours, theirs = seed_oss.DIALECT, qwen3_coder.DIALECT
    assert (ours.fmt, ours.wrappers) == ("seed_oss", (("<seed:tool_call>", "</seed:tool_call>"),))
    assert (ours.item_open.pattern, ours.param_open.pattern) == (theirs.item_open.pattern, theirs.param_open.pattern)
    assert (ours.item_close, ours.param_close) == (theirs.item_close, theirs.param_close)


def test_a_new_format_is_one_declaration() -> None:
    """A new declaration reaches the name lookup, the marker table and the stream triggers it is built into."""
    declared = (*DECLARED, TOY)
    assert _by_name(declared)["toy"] is TOY
    assert _other_names(declared)["toy_v1"] == (TOY,)
    assert "<toy>" in _markers._leads(tuple(m for f in declared for m in f.markers))["<"]
    assert "(?P<toy><toy>)" in _stream_tables._openers(declared)


def test_declaration_mistakes_fail_with_what_to_change() -> None:
    """A name taken twice, a marker the scan cannot find or a segment never closed is refused at build time."""
    with pytest.raises(ValueError, match="two tool formats are named 'hermes'"):
        _by_name((*DECLARED, Format(name="hermes", find=_find_nothing, markers=())))
    with pytest.raises(ValueError, match="'toy' declares 'glm', the name of another format"):
        _other_names((*DECLARED, Format(name="toy", find=_find_nothing, markers=(), other_names=("glm",))))
    with pytest.raises(ValueError, match="the marker 'toy:' must start with '<', '\\[' or '`'"):
        _markers._leads(("toy:",))
    unclosed = Format(name="toy", find=_find_nothing, markers=(), stream_openers=(("toy", "<toy>"),))
    with pytest.raises(ValueError, match="stream segments of kind 'toy' are opened but never closed"):
        _stream_tables._openers((*DECLARED, unclosed))


def test_prompt_formats_and_families_are_claimed_once() -> None:
    """Prompt formats come from their format's declaration; a prompt name or family claimed twice is refused."""
    assert {name: f.name for name, (_, f) in PROMPT_FORMATS.items()} == {
        "hermes": "hermes",
        "hermes_list": "hermes",
        "json": "llama3_json",
        "pythonic": "pythonic",
        "gemma_tool_code": "gemma",
    }
    grammar = CallGrammar("json", "", "", many=False, start="{")
    second = PromptFormat("json2", str, str, tool_response, grammar, families=("llama",))
    with pytest.raises(ValueError, match="'json' and 'json2' both claim family 'llama'"):
        _prompt_formats((*DECLARED, Format(name="toy", find=_find_nothing, markers=(), prompts=(second,))))
