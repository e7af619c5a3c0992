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
from tooldispatch.parsing.formats import qwen3_coder
from tooldispatch.parsing.formats._format import Format
from tooldispatch.parsing.formats._xml import XmlDialect, find_xml_calls

FORMAT: Final = "seed_oss"
OPEN: Final = "<seed:tool_call>"
CLOSE: Final = "</seed:tool_call>"
MARKERS: Final[tuple[str, ...]] = (OPEN,)

DIALECT: Final[XmlDialect] = qwen3_coder.dialect(FORMAT, ((OPEN, CLOSE),))
"""qwen3-coder's tags in Seed-OSS's wrapper."""


def find(text: str) -> list[RawCall]:
    """Find every ``<function=…>`` call of a Seed-OSS output."""
    return find_xml_calls(text, DIALECT)


DECLARATION: Final[Format] = Format(
    name=FORMAT,
    find=find,
    markers=MARKERS,
    stream_openers=(("seed_call", "<seed:tool_call>"),),
    stream_closers=(("seed_call", re.escape(CLOSE)),),
    text_values=True,
    other_names=("seed",),
)
"""Seed-OSS: qwen3-coder's calls inside ``<seed:tool_call>``, their values text typed by the schema."""
