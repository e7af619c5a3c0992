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

from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import qwen3_coder
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "seed_oss"
OPEN, CLOSE = "<seed:tool_call>", "</seed:tool_call>"
MARKERS: Final[tuple[str, ...]] = (OPEN,)

_Q: Final = qwen3_coder.DIALECT
DIALECT: Final = XmlDialect(
    fmt=FORMAT,
    item_prefix=_Q.item_prefix,
    item_open=_Q.item_open,
    item_close=_Q.item_close,
    param_prefix=_Q.param_prefix,
    param_open=_Q.param_open,
    param_close=_Q.param_close,
    wrappers=((OPEN, CLOSE),),
)


def find(text: str) -> list[RawCall]:
    """Find every ``<function=…>`` call of a Seed-OSS output."""
    return find_xml_calls(text, DIALECT)
