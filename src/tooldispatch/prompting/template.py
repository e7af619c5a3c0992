"""Chat templates: the model's own Jinja template (from GGUF metadata), rendered in a sandbox.

Rendering follows what ``transformers`` does for ``apply_chat_template``: ``trim_blocks`` and
``lstrip_blocks``, a ``tojson`` filter that keeps non-ASCII text as is, ``raise_exception`` and
``strftime_now`` helpers, and ``bos_token`` / ``eos_token`` in the context. The environment is jinja2's
``ImmutableSandboxedEnvironment``: a template can neither reach Python internals nor mutate its inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tooldispatch.errors import ConfigError

GEMMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] ~ '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "{{ '<start_of_turn>' ~ role ~ '\n' ~ (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)
"""Gemma 3's turn format, for GGUF files that carry no template (the base 270M model).

Gemma has no system or tool role: the system prompt opens the first user turn, and every non-assistant
turn is a ``user`` turn."""

BUILTIN_TEMPLATES: Mapping[str, str] = {"gemma3": GEMMA3_TEMPLATE}
"""Templates a manifest can name as ``chat_template = "builtin:<name>"``."""


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, sort_keys=sort_keys)


def _raise_exception(message: str) -> None:
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    """A compiled chat template.

    Args:
        source: the Jinja source.
        bos_token: the text of the begin-of-sequence token, as the template expects it.
        eos_token: the text of the end-of-sequence token.

    Raises:
        ConfigError: the template does not compile.
    """

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.Undefined)
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
            variables = meta.find_undeclared_variables(env.parse(source))
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"the chat template does not compile: {exc}") from exc
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.renders_tools = "tools" in variables

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """Render a conversation into the prompt text.

        Args:
            messages: chat messages (``role``, ``content``, and for native templates ``tool_calls``).
            tools: OpenAI tools-list entries, for templates that render tools themselves.
            add_generation_prompt: end with the opening of an assistant turn.
            **kwargs: template variables such as ``enable_thinking``.

        Raises:
            ConfigError: the template raised (``raise_exception``) or failed on these messages.
        """
        try:
            return self._template.render(
                messages=[dict(m) for m in messages],
                tools=[dict(t) for t in tools] if tools else None,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **kwargs,
            )
        except jinja2.TemplateError as exc:
            raise ConfigError(f"the chat template failed on these messages: {exc}") from exc


def template_source(setting: str, gguf_template: str | None) -> str:
    """Pick the template source a manifest's ``chat_template`` setting names.

    Args:
        setting: ``gguf`` (the file's own) or ``builtin:<name>``.
        gguf_template: the file's ``tokenizer.chat_template``, when it has one.

    Raises:
        ConfigError: the file has no template, or the builtin name is unknown.
    """
    if setting == "gguf":
        if gguf_template is None:
            raise ConfigError(
                "the GGUF file carries no tokenizer.chat_template; set chat_template = "
                f"'builtin:<name>' in the model's manifest (known: {', '.join(BUILTIN_TEMPLATES)})"
            )
        return gguf_template
    if setting.startswith("builtin:"):
        name = setting.removeprefix("builtin:")
        if name in BUILTIN_TEMPLATES:
            return BUILTIN_TEMPLATES[name]
    raise ConfigError(
        f"chat_template {setting!r} is neither 'gguf' nor a known builtin ({', '.join(BUILTIN_TEMPLATES)})"
    )
