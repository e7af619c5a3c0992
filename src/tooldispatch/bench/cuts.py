"""The runtime's parts switched off one at a time, for the agent benchmarks (``bench bfcl`` multi-turn, ``--cuts``).

Each cut is a cell of the run: the same model and cases, with one part of the runtime changed through the
``Agent``'s own options, so that every cut can be paired with the full runtime case by case. The cut's name is
part of the cell's key (``Cell.cut``), so a run folder holds every cut of a model side by side and resumes each.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from tooldispatch.bench.corpus import Cell
from tooldispatch.bench.stats import exact_rate, paired_difference
from tooldispatch.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Cut:
    """One variant of the runtime.

    Attributes:
        name: the cut's name in commands, cell keys and reports.
        changed: what differs from the full runtime, in the report's words.
        agent_options: the ``Agent`` keyword arguments that make the change.
    """

    name: str
    changed: str
    agent_options: Mapping[str, Any] = field(default_factory=dict)


FULL = Cut("full", "nothing: the runtime as shipped")

CUTS: Mapping[str, Cut] = {
    cut.name: cut
    for cut in (
        FULL,
        Cut(
            "no-repair",
            "schema-guided repair is off for every tool (repair='none'): a call whose arguments or names do not "
            "match the schema as written is refused with the validation error; the parser's tolerant reading stays",
            {"repair": "none"},
        ),
        Cut(
            "strict-parsing",
            "the parser reads only what its strict formats find in the content, as written, as a server's strict "
            "tool parser does (tolerant_parsing=False): no lenient JSON, no tag tolerances, no calls read from running "
            "text or from the reasoning; such a call stays text. Schema repair is off too (repair='none'), so against "
            "no-repair this cut measures the tolerant reading alone, and against the full runtime the whole parser",
            {"tolerant_parsing": False, "repair": "none"},
        ),
        Cut(
            "bare-feedback",
            "the answers to refused and failed calls are the error alone (feedback='bare'): its kind, the tool and "
            "the message; no argument signature, suggestion, corrected call or repeat note, and a replayed call "
            "gets its stored result without the note that it already ran",
            {"feedback": "bare"},
        ),
        Cut(
            "no-repeat-guard",
            "the repeat guard is off: a call already answered in the user's turn is not held back, and the model "
            "is not asked to answer from the results it has",
            {"repeat_guard": False},
        ),
        Cut(
            "answer-tool",
            "an added part rather than a cut: the agent offers its final_answer tool, so a model that only writes "
            "calls can still end its turn",
            {"answer_tool": True},
        ),
    )
}
"""Every cut, by name."""


def parse_cuts(text: str | Sequence[str]) -> list[Cut]:
    """The cuts named in ``text`` (comma-separated, or a list), in order, without repeats.

    Raises:
        ConfigError: a name is not a cut, or none is given.
    """
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in CUTS]
    if unknown:
        raise ConfigError(f"unknown cut {', '.join(map(repr, unknown))}; the cuts are: {', '.join(CUTS)}")
    if not names:
        raise ConfigError(f"name at least one cut ({', '.join(CUTS)})")
    return [CUTS[n] for n in dict.fromkeys(names)]


def _pairs(
    by_cell: Mapping[tuple[str, str], Mapping[str, T]],
) -> Iterator[tuple[str, str, str, Mapping[str, T], Mapping[str, T]]]:
    """Each cut cell with the full cell of the same model and group: ``(cut cell key, cut, group, the cut's runs,
    the full runtime's runs)``, in key order."""
    for (key, group), cut_runs in sorted(by_cell.items()):
        cell = Cell.from_key(key)
        full_runs = by_cell.get((replace(cell, cut=FULL.name).key, group))
        if cell.cut != FULL.name and full_runs is not None:
            yield key, cell.cut, group, cut_runs, full_runs


def paired_cuts(outcomes: Mapping[tuple[str, str], Mapping[str, bool]]) -> list[dict[str, Any]]:
    """Each cut against the full runtime of the same model.

    Args:
        outcomes: ``(cell key, group) → {case id: passed}``; a group is what rows are kept apart by (a BFCL
            category, the suite).

    Returns:
        One row per (cut cell, group) that has a full cell of the same model and group: the two pass rates over
        the cases both ran (each with its exact 95 % interval), their paired difference (cut − full) with its
        bootstrap 95 % interval, and the cases whose outcome changed.
    """
    rows = []
    for key, cut, group, cut_cases, full_cases in _pairs(outcomes):
        both = sorted(set(cut_cases) & set(full_cases))
        rows.append(
            {
                "cell": key,
                "cut": cut,
                "group": group,
                "full": exact_rate([full_cases[c] for c in both]),
                "with_cut": exact_rate([cut_cases[c] for c in both]),
                "difference": paired_difference(cut_cases, full_cases),
                "changed": [c for c in both if cut_cases[c] != full_cases[c]],
            }
        )
    return rows


def render_paired_cuts(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of each cut against the full runtime, and what each cut changes; empty when there is no
    pair."""
    if not rows:
        return ""
    lines = [
        "| model | cut | category | full runtime | with the cut | difference, cut − full (bootstrap 95 % CI) "
        "| cases that changed |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cell = Cell.from_key(row["cell"])
        changed = ", ".join(row["changed"]) or "none"
        lines.append(
            f"| {cell.model}@{cell.quant} | {row['cut']} | {row['group']} | {row['full'].fmt()} | "
            f"{row['with_cut'].fmt()} | {row['difference'].fmt()} | {changed} |"
        )
    lines.append("")
    for name in dict.fromkeys(row["cut"] for row in rows):
        lines.append(f"- **{name}**: {CUTS[name].changed}.")
    return "\n".join(lines) + "\n"


def paired_totals(measures: Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]]) -> list[dict[str, Any]]:
    """What each cut changed on the way, whatever the outcome: totals of each measure over the runs both cells ran.

    Args:
        measures: ``(cell key, group) → {run id: {measure: value}}`` (user turns answered, calls run, ...).

    Returns:
        One row per (cut cell, group) with a full cell of the same model and group: the runs both ran, and each
        measure's total with the full runtime and with the cut.
    """
    rows = []
    for key, cut, group, cut_runs, full_runs in _pairs(measures):
        both = sorted(set(cut_runs) & set(full_runs))
        names = list(dict.fromkeys(name for run in both for name in full_runs[run]))
        totals = {
            name: (sum(full_runs[r].get(name, 0) for r in both), sum(cut_runs[r].get(name, 0) for r in both))
            for name in names
        }
        rows.append({"cell": key, "cut": cut, "group": group, "runs": len(both), "totals": totals})
    return rows


def render_paired_totals(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of :func:`paired_totals`, each measure as ``full → with the cut``; empty without rows."""
    if not rows:
        return ""
    names = list(dict.fromkeys(name for row in rows for name in row["totals"]))
    lines = [
        "| model | cut | category | runs | " + " | ".join(f"{n}, full → cut" for n in names) + " |",
        "|" + "---|" * (4 + len(names)),
    ]
    for row in rows:
        cell = Cell.from_key(row["cell"])
        values = [row["totals"].get(n) for n in names]
        shown = [f"{_number(v[0])} → {_number(v[1])}" if v is not None else "-" for v in values]
        lines.append(
            f"| {cell.model}@{cell.quant} | {row['cut']} | {row['group']} | {row['runs']} | " + " | ".join(shown) + " |"
        )
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"
