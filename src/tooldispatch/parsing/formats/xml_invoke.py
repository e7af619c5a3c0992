"""XML invoke tool calls (MiniMax-M2, Claude-style prompts).

``<invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>``, optionally wrapped in
``<minimax:tool_call>``, ``<function_calls>`` or ``<tool_call>``. Values are text typed later by the tool's
schema; a ``string="true|false"`` attribute (DeepSeek V3.2 without its DSML prefix) says which are strings and
which JSON. An invoke may hold its arguments as one JSON object instead of parameter tags.
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from tooldispatch.parsing.formats._format import Format
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "xml_invoke"
MARKERS: Final[tuple[str, ...]] = ("<invoke",)

DIALECT: Final[XmlDialect] = XmlDialect(
    fmt=FORMAT,
    item_prefix="<invoke",
    item_open=re.compile(r"<invoke\s{1,8}name\s{0,8}=\s{0,8}[\"']?([^\"'>\n]{1,128})[\"']?\s{0,8}>"),
    item_close="</invoke>",
    param_prefix="<parameter",
    param_open=re.compile(
        r"<parameter\s{1,8}name\s{0,8}=\s{0,8}[\"']?([^\"'>\n]{1,128})[\"']?"
        r"(?:\s{1,8}string\s{0,8}=\s{0,8}[\"']?(true|false)[\"']?)?\s{0,8}>"
    ),
    param_close="</parameter>",
    wrappers=(
        ("<minimax:tool_call>", "</minimax:tool_call>"),
        ("<function_calls>", "</function_calls>"),
        (TOOL_CALL_OPEN, TOOL_CALL_CLOSE),
    ),
    json_body=True,
)


def find(text: str) -> list[RawCall]:
    """Find every ``<invoke name=…>`` call."""
    return find_xml_calls(text, DIALECT)


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    stream_openers=(("invoke", r"<invoke[\s>]"),),
    stream_closers=(("invoke", re.escape("</invoke>")),),
    text_values=True,
    other_names=("minimax_m2",),
)
"""XML invoke: ``<invoke name=…>`` calls, their values text typed by the schema (or by ``string=``)."""
