"""Prompting for prompt-mode models: tool prompt formats, chat templates, and GBNF grammars.

``render_prompt`` renders a conversation with the model's own chat template (from the GGUF, in a
sandbox), adding the tool block of the family's format when the template does not render tools itself.
``tool_call_grammar`` turns tool schemas into a GBNF grammar for constrained decoding. ``MarkerSplitter``
(from ``parsing.reasoning``, where the reasoning split and its marker table live) splits streamed output at a
family's reasoning tags.
"""

from __future__ import annotations

from tooldispatch.parsing.reasoning import MarkerSplitter
from tooldispatch.prompting.formats import FORMATS, ToolFormat, get_format
from tooldispatch.prompting.grammar import gbnf_literal, tool_call_grammar
from tooldispatch.prompting.prompt import prepare_messages, render_prompt
from tooldispatch.prompting.template import BUILTIN_TEMPLATES, GEMMA3_TEMPLATE, ChatTemplate, template_source

__all__ = [
    "BUILTIN_TEMPLATES",
    "FORMATS",
    "GEMMA3_TEMPLATE",
    "ChatTemplate",
    "MarkerSplitter",
    "ToolFormat",
    "gbnf_literal",
    "get_format",
    "prepare_messages",
    "render_prompt",
    "template_source",
    "tool_call_grammar",
]
