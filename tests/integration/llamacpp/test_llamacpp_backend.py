"""The in-process llama.cpp backend on the real SmolLM2-135M-Instruct Q4_1 file."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from tooldispatch.backends.base import Backend, ChatRequest, ContentDelta, Event, Finish, ReasoningDelta, Usage, collect
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.errors import ConfigError, ModelNotFoundError
from tooldispatch.models import Reasoning
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.prompting import tool_call_grammar
from tooldispatch.prompting.formats import FORMATS
from tooldispatch.toolspec import ToolSpec

pytestmark = pytest.mark.integration

WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)
TIME = ToolSpec(
    "get_time",
    "Get the local time in a time zone.",
    {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
)
ASK = [{"role": "user", "content": "What is the weather in Oslo?"}]


async def _events(backend: LlamaCppBackend, request: ChatRequest) -> list[Event]:
    return [ev async for ev in backend.stream(request)]


def test_capabilities(smollm2_backend: LlamaCppBackend) -> None:
    """The backend is a Backend: prompt-mode tools, grammar constraint, engine named with its version."""
    import llama_cpp

    assert isinstance(smollm2_backend, Backend)
    caps = smollm2_backend.capabilities
    assert (caps.native_tools, caps.constrained, caps.engine) == (False, True, "llama.cpp")
    assert caps.engine_version == llama_cpp.__version__


async def test_prompt_mode_stream_order_and_timestamps(smollm2_backend: LlamaCppBackend) -> None:
    """Content deltas, then Usage, then Finish; timestamps never go back; max_tokens ends with ``length``."""
    request = ChatRequest(messages=[{"role": "user", "content": "Count from 1 to 50."}], max_tokens=6)
    events = await _events(smollm2_backend, request)
    kinds = [type(e) for e in events]
    assert kinds[-2:] == [Usage, Finish]
    assert set(kinds[:-2]) == {ContentDelta}
    times = [e.t for e in events]
    assert times == sorted(times)
    usage, finish = events[-2], events[-1]
    assert isinstance(usage, Usage) and isinstance(finish, Finish)
    assert (usage.completion_tokens, finish.reason, finish.model) == (6, "length", "smollm2-135m-instruct")
    assert usage.prompt_tokens == len(smollm2_backend._tokenize(smollm2_backend.render(request)))


async def test_prompt_mode_renders_tools_in_the_family_format(smollm2_backend: LlamaCppBackend) -> None:
    """The prompt carries the hermes_list tool block inside the GGUF's ChatML template."""
    prompt = smollm2_backend.render(ChatRequest(messages=ASK, tools=[WEATHER]))
    assert prompt.startswith("<|im_start|>system\nYou may call functions")
    assert '<tools>[{"name": "get_weather"' in prompt
    assert prompt.endswith("<|im_start|>user\nWhat is the weather in Oslo?<|im_end|>\n<|im_start|>assistant\n")


async def test_constrained_mode_yields_a_valid_call(smollm2_backend: LlamaCppBackend) -> None:
    """With the grammar, the output is a strict hermes_list call of an offered tool whose arguments fit its schema."""
    request = ChatRequest(messages=ASK, tools=[WEATHER, TIME], constrained=True, tool_choice="required", max_tokens=64)
    completion = await collect(smollm2_backend.stream(request))
    assert completion.finish_reason == "stop"
    assert completion.content.startswith("<tool_call>[{")
    assert completion.content.endswith("}]</tool_call>")
    assert smollm2_backend.parser_format == "hermes"
    outcome = parse_tool_calls(completion.content, [WEATHER, TIME], tool_format=smollm2_backend.parser_format)
    assert len(outcome.calls) >= 1
    schemas = {"get_weather": WEATHER.parameters, "get_time": TIME.parameters}
    for call in outcome.calls:
        assert call.bucket == "ok_strict"
        jsonschema.validate(call.arguments, schemas[call.name])


async def test_closing_the_stream_stops_generation(smollm2_backend: LlamaCppBackend) -> None:
    """Closing a stream after its first delta stops the worker; the next request runs to its Finish."""
    stream = smollm2_backend.stream(ChatRequest(messages=ASK, max_tokens=200))
    first = await anext(stream)
    assert isinstance(first, ContentDelta)
    await stream.aclose()
    events = await _events(smollm2_backend, ChatRequest(messages=ASK, max_tokens=3))
    assert isinstance(events[-1], Finish) and events[-1].reason == "length"


def test_every_format_grammar_compiles(smollm2_backend: LlamaCppBackend) -> None:
    """llama.cpp parses the generated grammar of every tool format and tool_choice, with and without reasoning."""
    think, opened = Reasoning("<think>", "</think>"), Reasoning("<think>", "</think>", starts_open=True)
    for name in FORMATS:
        for reasoning in (None, think, opened):
            for choice in ("auto", "required", "get_time"):
                grammar = tool_call_grammar([WEATHER, TIME], name, tool_choice=choice, reasoning=reasoning)
                smollm2_backend.check_grammar(grammar)


def test_unparseable_grammar_is_refused(smollm2_backend: LlamaCppBackend) -> None:
    """A grammar llama.cpp cannot parse is a ConfigError, not a null sampler."""
    with pytest.raises(ConfigError, match=r"llama.cpp could not parse the tool-call grammar"):
        smollm2_backend.check_grammar("root ::= undefined-rule")


def test_missing_model_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model absent from the cache fails at construction with the command that makes it."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"run: tooldispatch models quantize smollm2-135m-instruct@Q5_1$"):
        LlamaCppBackend("smollm2-135m-instruct@Q5_1")


def test_bad_gguf_is_model_not_found(tmp_path: Path) -> None:
    """A file that is not GGUF fails with ModelNotFoundError saying to pull again, before llama.cpp sees it."""
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(ModelNotFoundError, match=r"is not a usable GGUF file .*pull NAME@QUANT --force"):
        LlamaCppBackend(bad)


async def test_template_opened_reasoning_streams_as_reasoning(smollm2_path: Path) -> None:
    """With a template that opens <think>, the grammar forces reasoning first and it streams as ReasoningDelta."""
    import dataclasses

    from tooldispatch.models import load_manifest, read_header

    manifest = dataclasses.replace(
        load_manifest("smollm2-135m-instruct"), reasoning=Reasoning("<think>", "</think>", starts_open=True)
    )
    template = read_header(smollm2_path).chat_template
    assert template is not None
    opened = template.replace("'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'")
    backend = LlamaCppBackend(smollm2_path, manifest=manifest, chat_format_override=opened, n_ctx=2048, n_threads=2)
    try:
        request = ChatRequest(messages=ASK, tools=[WEATHER], constrained=True, max_tokens=8)
        assert backend.render(request).endswith("<|im_start|>assistant\n<think>\n")
        assert backend.reasoning_open is True
        events = await _events(backend, request)
    finally:
        backend.close()
    assert {type(e) for e in events[:-2]} == {ReasoningDelta}
    assert isinstance(events[-1], Finish) and events[-1].reason == "length"
