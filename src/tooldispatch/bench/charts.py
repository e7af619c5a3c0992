"""PNG charts of a run's summaries (matplotlib, Agg backend: no display needed).

Each chart names what it shows, its units, and every cell as ``model@quant`` with its engine, so it
reads on its own when pasted elsewhere. Colours come from the Okabe-Ito palette, which stays distinguishable
with the common colour-vision deficiencies; the modes a reader compares most (strict only, + fallback,
+ repair) are orange, sky blue and dark blue, and accepted buckets are also hatched, so no reading rests on
hue alone. Cells are rows of horizontal bars, each named in full on its own line, and a chart is as tall
as its cells need: one cell gets a short chart, not a tall empty one.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tooldispatch.bench.scoring import BUCKETS
from tooldispatch.bench.summary import CellSummary

MODE_LABELS = {
    "baseline": "serving-stack default",
    "json_repair": "json_repair",
    "strict": "strict only",
    "fallback": "+ fallback",
    "repair": "+ repair",
}
MODE_ORDER = ("baseline", "json_repair", "strict", "fallback", "repair")
# Okabe & Ito, "Color Universal Design" (2008): distinguishable with protanopia, deuteranopia, tritanopia.
_MODE_COLORS = {
    "baseline": "#999999",  # grey
    "json_repair": "#CC79A7",  # reddish purple
    "strict": "#E69F00",  # orange
    "fallback": "#56B4E9",  # sky blue
    "repair": "#0072B2",  # blue
}
_BUCKET_COLORS = {
    "ok_strict": "#009E73",  # bluish green
    "ok_fallback": "#56B4E9",  # sky blue
    "repaired": "#0072B2",  # blue
    "InvalidJson": "#D55E00",  # vermillion
    "UnknownName": "#E69F00",  # orange
    "SchemaMismatch": "#F0E442",  # yellow
    "Truncated": "#CC79A7",  # reddish purple
    "Ambiguous": "#999999",  # grey: kept, never run
    "no_call": "#DDDDDD",  # light grey
    "error": "#000000",  # black
}
_ACCEPTED = ("ok_strict", "ok_fallback", "repaired")
_LIGHT = ("SchemaMismatch", "no_call", "ok_fallback", "UnknownName")  # labels on these fills are black


_WIDE = 11.0
"""Inches across every per-cell chart: cells are rows (horizontal bars), so labels never share a line."""


def _height(cells: int, *, bars: int) -> float:
    """Inches for ``cells`` rows of ``bars`` bars each: enough for the bars and their labels, no more."""
    return 2.4 + cells * max(0.6, 0.16 * bars + 0.25)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _tick(summary: CellSummary) -> str:
    return f"{summary.label}\n{summary.engine}"


def _engines(cells: Sequence[CellSummary]) -> str:
    return ", ".join(sorted({c.engine for c in cells if c.engine})) or "unknown engine"


def write_charts(cells: Sequence[CellSummary], out_dir: Path, *, title: str = "") -> list[Path]:
    """Write every chart for the cells into ``out_dir``; return the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if not cells:
        return []
    return [
        _buckets(cells, out_dir / "buckets.png", title),
        _modes(cells, out_dir / "accuracy.png", title, metric="accuracy"),
        _modes(cells, out_dir / "false_positives.png", title, metric="false_positive"),
        _latency(cells, out_dir / "latency.png", title),
    ]


def _buckets(cells: Sequence[CellSummary], path: Path, title: str) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.75 * len(cells)))
    labels = [_tick(c) for c in cells]
    left = [0.0] * len(cells)
    for bucket in BUCKETS:
        values = [100 * c.buckets[bucket].value for c in cells]
        if not any(values):
            continue
        ax.barh(
            labels,
            values,
            left=left,
            color=_BUCKET_COLORS[bucket],
            label=bucket,
            edgecolor="white",
            hatch="//" if bucket in _ACCEPTED else None,
        )
        for i, v in enumerate(values):
            if v >= 6:
                ink = "black" if bucket in _LIGHT else "white"
                ax.text(left[i] + v / 2, i, f"{v:.0f}", ha="center", va="center", color=ink, fontweight="bold")
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("share of outputs (%)")
    ax.set_title(f"{title}Where each output landed (one bucket per output; accepted buckets hatched)")
    ax.legend(title="bucket", loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _modes(cells: Sequence[CellSummary], path: Path, title: str, *, metric: str) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(_WIDE, _height(len(cells), bars=len(MODE_ORDER))))
    bar = 0.84 / len(MODE_ORDER)
    for j, mode in enumerate(MODE_ORDER):
        rates = [getattr(c, metric)[mode] for c in cells]
        ys = [i + (j - (len(MODE_ORDER) - 1) / 2) * bar for i in range(len(cells))]
        values = [100 * r.value for r in rates]
        err = [[100 * (r.value - r.low) for r in rates], [100 * (r.high - r.value) for r in rates]]
        ax.barh(ys, values, bar, xerr=err, capsize=2, color=_MODE_COLORS[mode], label=MODE_LABELS[mode])
        for y, r in zip(ys, rates, strict=True):
            ax.text(100 * r.high + 1, y, f"{100 * r.value:.0f}", ha="left", va="center", fontsize=7)
    _cell_axis(ax, cells)
    n = max((getattr(c, metric)["repair"].n for c in cells), default=0)
    if metric == "accuracy":
        ax.set_xlabel("BFCL AST accuracy (%), 95 % bootstrap CI")
        what = f"AST accuracy by parsing mode (cases that expect calls, n={n} per cell)"
    else:
        ax.set_xlabel("irrelevance cases with a call (%), 95 % CI")
        what = f"False positives: calls made on irrelevance cases (lower is better, n={n} per cell)"
    ax.set_xlim(0, 108)
    ax.set_title(textwrap.fill(f"{title}{what}", 90), fontsize=10, loc="left")
    ax.legend(
        title=f"how the raw output was turned into calls (engine: {_engines(cells)})",
        fontsize=8,
        ncols=3,
        loc="upper center",
        bbox_to_anchor=(0.4, -0.9 / _height(len(cells), bars=len(MODE_ORDER))),
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _latency(cells: Sequence[CellSummary], path: Path, title: str) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(_WIDE, _height(len(cells), bars=2)))
    ys = list(range(len(cells)))
    p50 = [c.latency_p50_s or 0.0 for c in cells]
    p95 = [c.latency_p95_s or 0.0 for c in cells]
    ax.barh([y - 0.2 for y in ys], p50, 0.4, color="#56B4E9", label="p50 per request")
    ax.barh([y + 0.2 for y in ys], p95, 0.4, color="#0072B2", label="p95 per request")
    top = max([*p95, 1e-09])
    for y, c in zip(ys, cells, strict=True):
        tps = f"{c.tokens_per_s:.0f} tok/s" if c.tokens_per_s else "tok/s n/a"
        ax.text((c.latency_p95_s or 0.0) + 0.01 * top, y + 0.2, tps, ha="left", va="center", fontsize=8)
    _cell_axis(ax, cells)
    ax.set_xlabel("seconds per request")
    ax.set_xlim(0, top * 1.2)
    ax.set_title(
        textwrap.fill(f"{title}Latency per request (labels: median decode tokens/s)", 90), fontsize=10, loc="left"
    )
    ax.legend(
        title=_engines(cells),
        fontsize=8,
        ncols=2,
        loc="upper center",
        bbox_to_anchor=(0.4, -0.9 / _height(len(cells), bars=2)),
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cell_axis(ax: Any, cells: Sequence[CellSummary]) -> None:
    """One row per cell, top to bottom in the report's order, each named in full (model@quant, engine)."""
    ax.set_yticks(range(len(cells)), [_tick(c) for c in cells], fontsize=8)
    ax.set_ylim(len(cells) - 0.5, -0.5)
    ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
    ax.set_axisbelow(True)
