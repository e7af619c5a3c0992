"""DeepSeek V3.2 tool calls in DSML markup.

DeepSeek V3.2's chat encoding (and the ``deepseek_v32`` tool parsers of vLLM and SGLang) writes calls with
tags whose names start with ``｜DSML｜`` (fullwidth bars, U+FF5C)::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

``string="true"`` marks a value written as its exact text; ``string="false"`` one written as JSON. An invoke
may instead hold its arguments as one JSON object. The same markup without ``｜DSML｜`` is read by the XML
invoke format (``xml_invoke``).
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._format import Format
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "deepseek_v32"
PREFIX: Final = "<｜DSML｜"
MARKERS: Final[tuple[str, ...]] = (PREFIX,)

# Bounded repeats only: each match costs a bounded time at a found prefix.
_NAME: Final = r"\s{1,8}name\s{0,8}=\s{0,8}[\"']?([^\"'>\n]{1,128})[\"']?"
_STRING: Final = r"(?:\s{1,8}string\s{0,8}=\s{0,8}[\"']?(true|false)[\"']?)?"

DIALECT: Final[XmlDialect] = XmlDialect(
    fmt=FORMAT,
    item_prefix=f"{PREFIX}invoke",
    item_open=re.compile(f"{PREFIX}invoke{_NAME}\\s{{0,8}}>"),
    item_close="</｜DSML｜invoke>",
    param_prefix=f"{PREFIX}parameter",
    param_open=re.compile(f"{PREFIX}parameter{_NAME}{_STRING}\\s{{0,8}}>"),
    param_close="</｜DSML｜parameter>",
    wrappers=((f"{PREFIX}function_calls>", "</｜DSML｜function_calls>"),),
    json_body=True,
)


def find(text: str) -> list[RawCall]:
    """Find every ``<｜DSML｜invoke name=…>`` call."""
    return find_xml_calls(text, DIALECT)


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    stream_openers=(("dsml_calls", "<｜DSML｜function_calls>"), ("dsml_invoke", r"<｜DSML｜invoke[\s>]")),
    stream_closers=(
        ("dsml_calls", re.escape("</｜DSML｜function_calls>")),
        ("dsml_invoke", re.escape("</｜DSML｜invoke>")),
    ),
    text_values=True,
    other_names=("dsml",),
)
"""DeepSeek V3.2: DSML invokes, their values text typed by the schema (or by ``string=``)."""
