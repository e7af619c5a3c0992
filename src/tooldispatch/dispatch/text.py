"""Text every encoding can carry: unpaired UTF-16 surrogates, found and written as their escapes.

Python strings (and ``json.loads``) allow a lone surrogate such as ``"\\ud800"``; UTF-8 cannot encode it, so
it would break SQLite writes, hashing and requests. Written as ``\\ud800`` text it is plain ASCII, and inside
JSON text it is the escape that reads back as the same value.
"""

from __future__ import annotations

import re

SURROGATE = re.compile("[\ud800-\udfff]")
"""One unpaired UTF-16 surrogate (a well-formed str holds no paired ones)."""


def escaped(text: str) -> str:
    """``text`` with each unpaired surrogate written as its ``\\udXXX`` escape; unchanged when there is none."""
    if not SURROGATE.search(text):
        return text
    return SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
