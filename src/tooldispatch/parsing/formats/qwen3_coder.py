"""Qwen3-Coder tool calls: ``<function=name><parameter=key>value</parameter></function>``.

Usually wrapped in ``<tool_call>…</tool_call>``, sometimes not. Values are strings as written.
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from tooldispatch.parsing.formats._format import Format
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "qwen3_coder"
MARKERS: Final[tuple[str, ...]] = ("<function=",)


def dialect(fmt: str, wrappers: tuple[tuple[str, str], ...]) -> XmlDialect:
    """qwen3-coder's ``<function=…>`` and ``<parameter=…>`` tags, for format ``fmt`` inside ``wrappers``."""
    return XmlDialect(
        fmt=fmt,
        item_prefix="<function=",
        item_open=re.compile(r"<function=([^>\n]{1,128})>"),
        item_close="</function>",
        param_prefix="<parameter=",
        param_open=re.compile(r"<parameter=([^>\n]{1,128})>"),
        param_close="</parameter>",
        wrappers=wrappers,
    )


DIALECT: Final[XmlDialect] = dialect(FORMAT, ((TOOL_CALL_OPEN, TOOL_CALL_CLOSE),))


def find(text: str) -> list[RawCall]:
    """Find every ``<function=…>`` call."""
    return find_xml_calls(text, DIALECT)


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    stream_openers=(("qwen_fn", "<function="),),
    stream_closers=(("qwen_fn", re.escape("</function>")),),
    text_values=True,
    other_names=("qwen3_xml",),
)
"""qwen3-coder: ``<function=…>`` calls, their values text typed by the schema."""
