"""``tooldispatch bench parser``: prints the parser's recovery and speed tables side by side."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tooldispatch.errors import ConfigError

if TYPE_CHECKING:
    from rich.table import Table

    from tooldispatch.bench.parser import Report

CORPUS_DIR = Path(
    "tests/fixtures/corpus"
)  # the same as tooldispatch.bench.parser.CORPUS_DIR, read without importing it

_BUCKET_ORDER = ("ok_strict", "ok_fallback", "repaired", "InvalidJson", "UnknownName", "SchemaMismatch", "Truncated")


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def tables(report: Report) -> list[Table]:
    """Return the report as ``rich`` tables, in the order they are printed."""
    from rich.table import Table

    recovery = Table(title=f"Recovery on {report.records} labelled outputs (exact name and arguments)")
    for column in ("method", "exact calls", "rate", "records right", "wrong or extra calls"):
        recovery.add_column(column, justify="left" if column == "method" else "right")
    for r in report.recovery:
        recovery.add_row(
            r.label,
            f"{r.exact}/{r.expected}",
            _pct(r.exact, r.expected),
            f"{r.records_right}/{r.records}",
            str(r.wrong),
        )

    buckets = Table(title="Candidates per bucket (full cascade)")
    buckets.add_column("bucket")
    buckets.add_column("candidates", justify="right")
    total = sum(report.buckets.values())
    for name in _BUCKET_ORDER:
        buckets.add_row(name, f"{report.buckets.get(name, 0)} ({_pct(report.buckets.get(name, 0), total)})")

    formats = Table(title="Recovery per corpus format (full cascade)")
    for column in ("format", "records", "exact calls", "records right", "wrong or extra"):
        formats.add_column(column, justify="left" if column == "format" else "right")
    for name, r in sorted(report.formats.items()):
        formats.add_row(name, str(r.records), f"{r.exact}/{r.expected}", f"{r.records_right}/{r.records}", str(r.wrong))

    speed = Table(title=f"Speed on the same inputs (median round; {report.build})")
    for column in ("inputs", "method", "exact calls", "µs per call", "MB/s"):
        speed.add_column(column, justify="left" if column in ("inputs", "method") else "right")
    for set_name, timings in report.timings.items():
        for t in timings:
            speed.add_row(
                f"{set_name} ({t.inputs}, {t.size / 1000:.1f} KB)",
                t.label,
                f"{t.exact}/{t.calls}" if t.exact >= 0 else "-",
                f"{t.us_per_call:.1f}",
                f"{t.mb_per_s:.2f}",
            )

    ratios = Table(title=f"Ratios against the targets ({report.build})")
    for column in ("ratio", "measured", "target", "met", "detail"):
        ratios.add_column(column)
    for ratio in report.ratios:
        ratios.add_row(ratio.name, f"{ratio.value:.2f}x", ratio.target, "yes" if ratio.met else "NO", ratio.detail)

    sweep = Table(title="Payload-size sweep: one hermes call, argument string of each size (median round)")
    for column in (
        "string",
        "payload",
        "json.loads µs",
        "parse_tool_calls µs",
        "parse / json.loads",
        "malformed: json_repair µs",
        "malformed: cascade µs",
        "json_repair / cascade",
        "exact (cascade, json_repair)",
    ):
        sweep.add_column(column, justify="left" if column == "string" else "right")
    for row in report.sweep:
        sweep.add_row(
            f"{row.kb:g} KB",
            f"{row.payload:,} B",
            f"{row.loads * 1e6:.1f}",
            f"{row.parse * 1e6:.1f}",
            f"{row.parse / row.loads:.2f}x",
            f"{row.peer * 1e6:.1f}",
            f"{row.cascade * 1e6:.1f}",
            f"{row.peer / row.cascade:.2f}x",
            ", ".join("yes" if ok else "no" for ok in row.exact),
        )

    slowest = Table(title="Slowest outputs to parse")
    slowest.add_column("record")
    slowest.add_column("µs", justify="right")
    for name, micros in report.slowest:
        slowest.add_row(name, f"{micros:.1f}")
    return [recovery, buckets, formats, speed, ratios, sweep, slowest]


def markdown(table: Table) -> str:
    """Render a ``rich`` table as a GitHub Markdown table (for docs/benchmarks.md)."""
    headers = [str(c.header) for c in table.columns]
    rows = list(zip(*[[str(cell) for cell in c.cells] for c in table.columns], strict=True))
    lines = [f"**{table.title}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


CorpusOpt = Annotated[
    Path, typer.Option("--corpus", help="Directory of labelled *.jsonl records and tools.json.", show_default=True)
]
RoundsOpt = Annotated[int, typer.Option("--rounds", min=1, help="Timing rounds per method; the median round is kept.")]
MarkdownOpt = Annotated[bool, typer.Option("--markdown", help="Print Markdown tables instead of rich tables.")]


def bench_parser(corpus: CorpusOpt = CORPUS_DIR, rounds: RoundsOpt = 20, as_markdown: MarkdownOpt = False) -> None:
    """Recovery per stage and bucket, and speed against json.loads and json_repair, on the labelled corpus."""
    from rich.console import Console

    from tooldispatch.bench.parser import run

    try:
        report = run(corpus, rounds=rounds)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    console = Console(width=160)
    for table in tables(report):
        if as_markdown:
            typer.echo(markdown(table))
        else:
            console.print(table)
    if not all(r.met for r in report.ratios):
        missed = ", ".join(r.name for r in report.ratios if not r.met)
        console.print(f"[bold red]targets missed:[/] {missed}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``bench parser`` to the ``bench`` group."""
    bench.command("parser")(bench_parser)
