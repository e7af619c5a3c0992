"""ByteDance Seed-OSS tool calls: qwen3-coder's XML parameters inside ``<seed:tool_call>``.

Seed-OSS's chat template (and vLLM's ``seed_oss`` tool parser) writes::

    <seed:tool_call>
    <function=get_weather>
    <parameter=city>Paris</parameter>
    </function>
    </seed:tool_call>

and reasons in ``<seed:think>…</seed:think>`` (split off by ``parsing.reasoning``). Values are text typed later
by the tool's schema.
"""

from __future__ import annotations

import re
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "seed_oss"
OPEN: Final = "<seed:tool_call>"
CLOSE: Final = "</seed:tool_call>"
MARKERS: Final[tuple[str, ...]] = (OPEN,)

# qwen3-coder's tags (``formats/qwen3_coder.py``) in Seed-OSS's wrapper.
DIALECT: Final[XmlDialect] = XmlDialect(
    fmt=FORMAT,
    item_prefix="<function=",
    item_open=re.compile(r"<function=([^>\n]{1,128})>"),
    item_close="</function>",
    param_prefix="<parameter=",
    param_open=re.compile(r"<parameter=([^>\n]{1,128})>"),
    param_close="</parameter>",
    wrappers=((OPEN, CLOSE),),
)


def find(text: str) -> list[RawCall]:
    """Find every ``<function=…>`` call of a Seed-OSS output."""
    return find_xml_calls(text, DIALECT)
