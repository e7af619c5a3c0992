"""Reports of a run: ``report.md`` (tables), PNG charts, ``summary.json``, and optionally ``report.html``.

``build_report`` scores every stored output with the current parser, so a report is also a replay.
"""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tooldispatch.bench.bfcl_data import BFCL_POLICY
from tooldispatch.bench.charts import MODE_LABELS, MODE_ORDER, write_charts
from tooldispatch.bench.corpus import OutputRecord
from tooldispatch.bench.scoring import BUCKETS, ParseFn, ScoredOutput, score_output
from tooldispatch.bench.summary import CellSummary, QuantDifference, quant_differences, summarize_cell
from tooldispatch.policy import ToolPolicy


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Every cell's summary and the paired differences of a run.

    Attributes:
        cells: per-cell summaries, in the order cells first appear.
        differences: each quantization of a model against that model's first cell, and each constrained cell
            against the same file unconstrained.
        meta: what the run was asked to do.
    """

    cells: Sequence[CellSummary]
    differences: Sequence[QuantDifference]
    meta: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON written to ``summary.json``."""
        return {
            "meta": dict(self.meta),
            "cells": [c.to_dict() for c in self.cells],
            "differences": [d.to_dict() for d in self.differences],
        }


def score_records(
    records: Iterable[OutputRecord], *, parse: ParseFn | None = None, policy: ToolPolicy = BFCL_POLICY
) -> dict[str, list[tuple[OutputRecord, ScoredOutput]]]:
    """Score every record, grouped by cell in first-seen order (BFCL records only), tools declared by ``policy``."""
    by_cell: dict[str, list[tuple[OutputRecord, ScoredOutput]]] = defaultdict(list)
    for record in records:
        if record.case.get("functions") is None:
            continue
        by_cell[record.cell].append((record, score_output(record, parse=parse, policy=policy)))
    return dict(by_cell)


def summarize(
    records: Iterable[OutputRecord],
    *,
    meta: Mapping[str, Any] | None = None,
    parse: ParseFn | None = None,
    policy: ToolPolicy = BFCL_POLICY,
) -> RunSummary:
    """Score and summarize records; ``meta["policy"]`` says which tool policy they were scored under."""
    by_cell = score_records(records, parse=parse, policy=policy)
    meta = {**(meta or {}), "policy": policy.source}
    cells = _distinct_labels([summarize_cell(key, rows) for key, rows in by_cell.items()])
    diffs = quant_differences({k: [s for _, s in rows] for k, rows in by_cell.items()})
    return RunSummary(cells=cells, differences=diffs, meta=meta)


def _distinct_labels(cells: list[CellSummary]) -> list[CellSummary]:
    """The cells with the backend added to each label that several cells share (the same model and quantization
    in process and through a server), so that every row and bar of a report names one cell."""
    count: dict[str, int] = defaultdict(int)
    for c in cells:
        count[c.label] += 1
    return [replace(c, label=f"{c.label} [{c.cell.split('|')[0]}]") if count[c.label] > 1 else c for c in cells]


def report_title(summary: RunSummary, base: str, *, date: str | None = None) -> str:
    """The report's title: what was run, on which models and engines, and when.

    ``date`` defaults to ``meta["date"]`` when the run recorded one, else today's date (UTC).
    """
    models = list(dict.fromkeys(f"{c.model}@{c.quant}" if c.quant else c.model for c in summary.cells))
    engines = list(dict.fromkeys(c.engine for c in summary.cells if c.engine))
    when = date or str(summary.meta.get("date") or datetime.now(UTC).strftime("%Y-%m-%d"))
    shown = ", ".join(models[:4]) + (f" and {len(models) - 4} more" if len(models) > 4 else "")
    parts = [base or "Benchmark report", shown or "no cells", ", ".join(engines) or "unknown engine", when]
    return " — ".join(parts)


def write_report(summary: RunSummary, out_dir: Path, *, html_too: bool = False, title: str = "") -> list[Path]:
    """Write ``report.md``, ``summary.json`` and the charts (and ``report.html``); return the files.

    ``title`` names the benchmark (``BFCL``); the written title adds the models, engines and date.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    full = report_title(summary, title)
    charts = write_charts(summary.cells, out_dir, title=f"{title}: " if title else "")
    md = render_markdown(summary, [p.name for p in charts], title=full)
    md_path = out_dir / "report.md"
    md_path.write_text(md, encoding="utf-8")
    json_path = out_dir / "summary.json"
    json_path.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    files = [md_path, json_path, *charts]
    if html_too:
        html_path = out_dir / "report.html"
        html_path.write_text(markdown_to_html(md, title=full), encoding="utf-8")
        files.append(html_path)
    return files


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _types(types: Mapping[str, int]) -> str:
    if not types:
        return "-"
    return ", ".join(f"{t}×{n}" for t, n in sorted(types.items(), key=lambda kv: -kv[1]))


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


LEGENDS = {
    "cells": "*Columns:* **cell** model@quant, marked [server] when the server's own tool parsing was scored, "
    "[constrained] for grammar-bound decoding, and with its backend when two cells would share a name; **engine** "
    "the inference engine "
    "and its version; **tensor types** the quantization types really stored in the file; **outputs** model "
    "outputs kept; **errors** requests that got no output.",
    "buckets": "*Columns:* **ok_strict** a call in the model's documented format; **ok_fallback** a call the "
    "tolerant fallback found (wrong wrapper, bare JSON, python syntax); **repaired** accepted after a "
    "schema-guided repair; **InvalidJson**, **UnknownName**, **SchemaMismatch**, **Truncated** rejected, by "
    "reason; **no_call** nothing call-like; **error** the request failed; **in_reasoning** a call found only "
    "inside the reasoning.",
    "modes": "*Columns:* how the raw output is turned into calls. **serving-stack default** the parser a serving "
    "stack applies by default; **json_repair** the json_repair library on the output; **strict only** the "
    "documented format alone; **+ fallback** also the tolerant fallback; **+ repair** also schema-guided "
    "repair (tooldispatch's full cascade).",
}
"""One short legend per table, printed under it, so the report reads without docs/bench.md."""


def render_markdown(summary: RunSummary, charts: Sequence[str], *, title: str) -> str:
    """The Markdown report: cells, buckets, accuracy three ways and against both baselines, false positives,
    per-category accuracy, quantization differences, latency and cost."""
    cells = summary.cells
    out = [f"# {title}", ""]
    commands = summary.meta.get("commands") or ([summary.meta["command"]] if summary.meta.get("command") else [])
    if commands:
        out += [
            "Commands (every invocation that added results to this run):",
            "",
            "```",
            *map(str, commands),
            "```",
            "",
        ]
    if summary.meta.get("policy"):
        out += [f"Tool policy (what the parser was told the tools are): {summary.meta['policy']}.", ""]
    out += ["## Cells", ""]
    out += _table(
        ["cell", "engine", "tensor types (real, from the file)", "outputs", "errors"],
        ([c.label, c.engine or "-", _types(c.tensor_types), str(c.outputs), str(c.errors)] for c in cells),
    )
    out += [LEGENDS["cells"], ""]
    out += ["## Output buckets (% of outputs)", ""]
    out += _table(
        ["cell", *BUCKETS, "in_reasoning"],
        ([c.label, *(_pct(c.buckets[b].value) for b in BUCKETS), _pct(c.in_reasoning.value)] for c in cells),
    )
    out += [LEGENDS["buckets"], ""]
    out += ["## BFCL AST accuracy (cases that expect calls; %, 95 % bootstrap CI)", ""]
    out += _table(
        ["cell", *(MODE_LABELS[m] for m in MODE_ORDER)],
        ([c.label, *(c.accuracy[m].fmt() for m in MODE_ORDER)] for c in cells),
    )
    out += [LEGENDS["modes"], ""]
    out += ["## False positives on irrelevance (share of cases with a call; lower is better)", ""]
    out += _table(
        ["cell", *(MODE_LABELS[m] for m in MODE_ORDER)],
        ([c.label, *(c.false_positive[m].fmt() for m in MODE_ORDER)] for c in cells),
    )
    categories = sorted({cat for c in cells for cat in c.by_category})
    out += ["## Per category (% correct; irrelevance: no call), strict only → + repair", ""]
    out += _table(
        ["cell", *categories],
        (
            [
                c.label,
                *(
                    f"{_pct(c.by_category[cat]['strict'].value)} → {_pct(c.by_category[cat]['repair'].value)}"
                    if cat in c.by_category
                    else "-"
                    for cat in categories
                ),
            ]
            for c in cells
        ),
    )
    if summary.differences:
        out += ["## Paired differences (by case and seed; pp, 95 % CI)", ""]
        out += [
            "Each quantization of a model against its first cell in the same engine and decoding mode; each "
            "constrained cell against the same file decoded freely.",
            "",
        ]
        labels = {c.cell: c.label for c in cells}
        rows = []
        for d in summary.differences:
            a, b = labels.get(d.a, d.a.split("|")[1]), labels.get(d.b, d.b.split("|")[1])
            for metric, values in (("accuracy", d.accuracy), ("false positives", d.false_positive)):
                cells_text = [values[m].fmt() + (" *" if values[m].significant else "") for m in MODE_ORDER]
                rows.append([f"{a} − {b}", metric, *cells_text])
        out += _table(["difference", "metric", *(MODE_LABELS[m] for m in MODE_ORDER)], rows)
        out += ["`*`: the interval excludes zero.", ""]
    out += ["## Latency and cost", ""]
    out += _table(
        ["cell", "p50 (s)", "p95 (s)", "decode tok/s (median)", "completion tokens (mean)", "cost (USD)", "providers"],
        (
            [
                c.label,
                _num(c.latency_p50_s, 2),
                _num(c.latency_p95_s, 2),
                _num(c.tokens_per_s, 1),
                _num(c.completion_tokens_mean, 1),
                "-" if c.cost_usd is None else f"{c.cost_usd:.6f}",
                ", ".join(f"{p}: {n}" for p, n in sorted(c.providers.items())) or "-",
            ]
            for c in cells
        ),
    )
    with_k = [c for c in cells if c.pass_k]
    if with_k:
        out += ["## pass^k over seeds (+ repair)", ""]
        ks = sorted({k for c in with_k for k in c.pass_k["repair"]})
        out += _table(
            ["cell", *(f"pass^{k}" for k in ks)],
            ([c.label, *(_pct(c.pass_k["repair"].get(k)) for k in ks)] for c in with_k),
        )
    if charts:
        out += ["## Charts", ""]
        out += [f"![{name}]({name})" for name in charts]
        out.append("")
    return "\n".join(out)


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _inline(line: str) -> str:
    """A paragraph's text with ``**bold**`` and ``*italic*`` (the legends' only markup), escaped."""
    text = html.escape(line)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text)


def markdown_to_html(markdown: str, *, title: str) -> str:
    """A small HTML page of the report (headings, tables, code blocks, images, paragraphs)."""
    body: list[str] = []
    in_code = False
    table: list[list[str]] = []

    def flush_table() -> None:
        if not table:
            return
        head, *rows = table
        body.append(
            "<div class='scroll'><table><thead><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head)
            + "</tr></thead>"
        )
        body.append(
            "<tbody>"
            + "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>" for r in rows)
            + "</tbody></table></div>"
        )
        table.clear()

    for line in markdown.splitlines():
        if line.startswith("```"):
            flush_table()
            body.append("</pre>" if in_code else "<pre>")
            in_code = not in_code
        elif in_code:
            body.append(html.escape(line))
        elif line.startswith("|"):
            if set(line.replace("|", "").strip()) <= {"-"}:
                continue
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        else:
            flush_table()
            if line.startswith("#"):
                level = len(line) - len(line.lstrip("#"))
                body.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
            elif line.startswith("![") and "](" in line:
                src = line[line.index("](") + 2 : -1]
                body.append(f'<p><img src="{html.escape(src)}" alt="{html.escape(src)}"></p>')
            elif line.strip():
                body.append(f"<p>{_inline(line)}</p>")
    flush_table()
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.4}"
        ".scroll{overflow-x:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}img{max-width:100%;height:auto}"
        "pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f6f6;padding:.5em}"
        "@media (max-width:600px){body{margin:1em auto}td,th{font-size:11px}}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
