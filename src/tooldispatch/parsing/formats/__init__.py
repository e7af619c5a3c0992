"""The strict stage: one small finder per documented tool-call format, and the registries built from them.

Each format module declares its format as a :class:`~tooldispatch.parsing.formats._format.Format` constant:
its finder (a pure function ``find(text) -> list[RawCall]``), the cheap substring markers that must appear in
the text before the finder is worth running, its stream segments, how its values are typed, its other names and
its prompt formats. :data:`DECLARED` lists them in the order ties between overlapping finds are settled; every
table below (and those of ``parsing._markers``, ``parsing._stream_tables``, ``parsing._typed_values`` and
``prompting``) is built from it.
"""

from __future__ import annotations

from typing import Final

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
from tooldispatch.parsing.formats._format import Format, PromptFormat

DECLARED: Final[tuple[Format, ...]] = (
    hermes.DECLARATION,
    glm.DECLARATION,
    qwen3_coder.DECLARATION,
    seed_oss.DECLARATION,
    xml_invoke.DECLARATION,
    mistral.DECLARATION,
    kimi.DECLARATION,
    deepseek.DECLARATION,
    dsml.DECLARATION,
    harmony.DECLARATION,
    llama.DECLARATION_LLAMA4,
    llama.DECLARATION_LLAMA3,
    pythonic.DECLARATION,
    gemma.DECLARATION,
)
"""Every strict format, in the order ties between overlapping finds are settled (then the order of the prompt
formats and of the names in messages)."""


def _by_name(declared: tuple[Format, ...]) -> dict[str, Format]:
    """The formats by name; two formats of one name are a mistake in a format module."""
    out: dict[str, Format] = {}
    for f in declared:
        if f.name in out:
            raise ValueError(f"two tool formats are named {f.name!r}; give the new format's declaration another name")
        out[f.name] = f
    return out


FORMATS: Final[dict[str, Format]] = _by_name(DECLARED)
"""Every strict format by name, in :data:`DECLARED` order."""

_AUTO: Final[tuple[Format, ...]] = tuple(
    Format(
        name=f.name,
        find=f.find if f.auto_find is None else f.auto_find,
        markers=f.markers if f.auto_markers is None else f.auto_markers,
    )
    for f in DECLARED
)
"""What ``auto`` runs, by rank: each format's ``auto_find`` where it declares one (hermes and GLM share the
``<tool_call>`` tag: one pass reads each block with the format owning its body; GLM pairs with no wrapper are
read on their own)."""

_AUTO_BY_MARKER: Final[dict[str, tuple[int, ...]]] = {
    marker: tuple(rank for rank, f in enumerate(_AUTO) if marker in f.markers) for f in _AUTO for marker in f.markers
}


def _other_names(declared: tuple[Format, ...]) -> dict[str, tuple[Format, ...]]:
    """Each other name a format declares (and each of its prompt formats' names) → the formats it selects."""
    names = {f.name for f in declared}
    out: dict[str, list[Format]] = {}
    for f in declared:
        for name in (*f.other_names, *(p.name for p in f.prompts)):
            if name in names and name != f.name:
                raise ValueError(f"{f.name!r} declares {name!r}, the name of another format; remove it from one")
            if name != f.name and f not in out.setdefault(name, []):
                out[name].append(f)
    return {name: tuple(formats) for name, formats in out.items()}


OTHER_NAMES: Final[dict[str, tuple[Format, ...]]] = _other_names(DECLARED)
"""The other names ``tool_format`` accepts: vLLM's ``--tool-call-parser`` names and the prompt formats of model
manifests, each declared by its format (``llama4_pythonic``, declared by two, selects both)."""


def _prompt_formats(declared: tuple[Format, ...]) -> dict[str, tuple[PromptFormat, Format]]:
    """Each prompt format by name, with the format it belongs to; names and families must be unique."""
    out: dict[str, tuple[PromptFormat, Format]] = {}
    families: dict[str, str] = {}
    for f in declared:
        for p in f.prompts:
            if p.name in out:
                raise ValueError(f"two prompt formats are named {p.name!r}; give the new one another name")
            out[p.name] = (p, f)
            for family in p.families:
                if family in families:
                    raise ValueError(f"{families[family]!r} and {p.name!r} both claim family {family!r}; keep one")
                families[family] = p.name
    return out


PROMPT_FORMATS: Final[dict[str, tuple[PromptFormat, Format]]] = _prompt_formats(DECLARED)
"""Every prompt format by name, with the format whose finder reads what it asks for."""
