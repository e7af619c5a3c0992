"""The strict stage: one small finder per documented tool-call format.

Each finder is a pure function ``find(text) -> list[RawCall]``. ``FORMATS`` maps the names accepted by
``parse_tool_calls(tool_format=...)`` to the finder and the cheap substring markers that must appear in
the text before the finder is worth running.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tooldispatch.errors import ConfigError
from tooldispatch.parsing._markers import scan_markers
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import (
    deepseek,
    dsml,
    gemma,
    glm,
    harmony,
    hermes,
    kimi,
    llama,
    mistral,
    pythonic,
    qwen3_coder,
    seed_oss,
    xml_invoke,
)
from tooldispatch.parsing.formats._common import is_schema_echo


@dataclass(frozen=True, slots=True)
class Format:
    """One strict format.

    Attributes:
        name: the name accepted by ``tool_format``.
        markers: markers of ``tooldispatch.parsing._markers`` of which one must appear for ``auto`` to run
            the finder.
        find: the finder.
    """

    name: str
    markers: tuple[str, ...]
    find: Callable[[str], list[RawCall]]


FORMATS: Final[dict[str, Format]] = {
    f.name: f
    for f in (
        Format("hermes", hermes.MARKERS, hermes.find),
        Format("glm", glm.MARKERS, glm.find),
        Format("qwen3_coder", qwen3_coder.MARKERS, qwen3_coder.find),
        Format("seed_oss", seed_oss.MARKERS, seed_oss.find),
        Format("xml_invoke", xml_invoke.MARKERS, xml_invoke.find),
        Format("mistral", mistral.MARKERS, mistral.find),
        Format("kimi_k2", kimi.MARKERS, kimi.find),
        Format("deepseek", deepseek.MARKERS, deepseek.find),
        Format("deepseek_v32", dsml.MARKERS, dsml.find),
        Format("harmony", harmony.MARKERS, harmony.find),
        Format("llama4", llama.MARKERS_LLAMA4, llama.find_llama4),
        Format("llama3_json", llama.MARKERS_LLAMA3, llama.find_llama3),
        Format("gemma", gemma.MARKERS, gemma.find),
        Format("pythonic", pythonic.MARKERS, pythonic.find),
    )
}
"""Every strict format, in the order ties between overlapping finds are settled."""
_AUTO: Final[tuple[Format, ...]] = (
    # hermes and GLM share the <tool_call> tag: one pass reads each block with the format owning its body; GLM
    # pairs with no wrapper are read on their own.
    Format("hermes", hermes.MARKERS, hermes.find_tool_call_tags),
    Format("glm", (glm.BARE_MARKER,), glm.find_bare),
    *(f for name, f in FORMATS.items() if name not in ("hermes", "glm")),
)

_AUTO_BY_MARKER: Final[dict[str, tuple[int, ...]]] = {
    marker: tuple(rank for rank, f in enumerate(_AUTO) if marker in f.markers) for f in _AUTO for marker in f.markers
}


ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "qwen": ("hermes",),
    "hermes_list": ("hermes",),
    "glm45": ("glm",),
    "glm47": ("glm",),
    "qwen3_xml": ("qwen3_coder",),
    "seed": ("seed_oss",),
    "minimax_m2": ("xml_invoke",),
    "deepseek_v3": ("deepseek",),
    "deepseek_v31": ("deepseek",),
    "dsml": ("deepseek_v32",),
    "kimi": ("kimi_k2",),
    "openai": ("harmony",),
    "gpt_oss": ("harmony",),
    "llama3": ("llama3_json",),
    "json": ("llama3_json",),
    "llama4_pythonic": ("llama4", "pythonic"),
    "gemma_tool_code": ("gemma",),
}
"""Other names for the formats: vLLM's ``--tool-call-parser`` names and the prompt formats of model manifests."""


def select_formats(text: str, tool_format: str, markers: frozenset[str] | None = None) -> list[Format]:
    """Return the finders to run: those whose markers appear (``auto``) or the one named.

    Raises:
        ConfigError: ``tool_format`` is neither ``auto``, a known format nor one of ``ALIASES``.
    """
    if tool_format == "auto":
        present = scan_markers(text) if markers is None else markers
        # Usually one or two markers are present: look up their formats rather than test every format.
        ranks: set[int] = set()
        for marker in present:
            ranks.update(_AUTO_BY_MARKER.get(marker, ()))
        return [_AUTO[rank] for rank in sorted(ranks)]
    named = FORMATS.get(tool_format)
    if named is not None:
        return [named]
    if tool_format in ALIASES:
        return [FORMATS[name] for name in ALIASES[tool_format]]
    known = ", ".join(["auto", *FORMATS, *ALIASES])
    raise ConfigError(f"unknown tool_format {tool_format!r}; use one of: {known}")


def find_strict(text: str, tool_format: str = "auto", markers: frozenset[str] | None = None) -> list[RawCall]:
    """Run the selected finders and keep non-overlapping finds, in text order.

    Echoed tool declarations (arguments that are a JSON Schema) are dropped. Where two formats claim
    overlapping text, the find that starts first (then the longer one, then the
    format listed first in ``FORMATS``) wins; finds of one format never conflict with each other. One
    exception keeps a bad block from dropping good ones: a call cut off at the end of the text whose
    arguments could not be read (``[f(`` never closed) yields to readable calls of other formats inside it.
    """
    selected = select_formats(text, tool_format, markers)
    if not selected:
        return []
    found: list[tuple[int, int, int, RawCall]] = []
    for rank, fmt in enumerate(selected):
        try:
            calls = fmt.find(text)
        except (RecursionError, TimeoutError):
            # Pathological input (thousands of nested brackets, a regex past its time bound): no find.
            continue
        found.extend((c.span[0], -c.span[1], rank, c) for c in calls if not is_schema_echo(c.arguments))
    if len(selected) == 1:
        # One finder: its finds are already in text order and never conflict.
        return [t[3] for t in found]
    found = _without_broken_cutoffs(found)
    found.sort(key=lambda t: (t[0], t[1], t[2]))
    kept: list[RawCall] = []
    owner: tuple[int, tuple[int, int]] | None = None
    last_end = -1
    for start, neg_end, rank, call in found:
        end = -neg_end
        if start >= last_end:
            kept.append(call)
            owner = (rank, call.span)
            last_end = end
        elif owner is not None and owner[0] == rank:
            kept.append(call)
            last_end = max(last_end, end)
    return kept


_Find = tuple[int, int, int, RawCall]


def _without_broken_cutoffs(found: list[_Find]) -> list[_Find]:
    """Drop each unreadable call cut off at the end that holds a readable call of another format."""
    broken = [t for t in found if t[3].truncated and t[3].decode_error is not None]
    if not broken:
        return found
    readable = [t for t in found if t[3].decode_error is None]
    dropped: set[int] = set()
    for start, neg_end, rank, call in broken:
        end = -neg_end
        if any(start <= s and -e <= end and r != rank for s, e, r, _ in readable):
            dropped.add(id(call))
    return [t for t in found if id(t[3]) not in dropped] if dropped else found
