"""The parse-repair rates of proxied traffic as a Markdown report with a PNG chart (``tooldispatch report``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tooldispatch.errors import ConfigError
from tooldispatch.proxy.stats import BUCKETS, Rates, has_requests, rates
from tooldispatch.store import open_store

_COLORS = {
    "ok_strict": "#1b5e20",
    "ok_fallback": "#66bb6a",
    "repaired": "#c5e1a5",
    "InvalidJson": "#b71c1c",
    "UnknownName": "#ef6c00",
    "SchemaMismatch": "#fdd835",
    "Truncated": "#6a1b9a",
    "Ambiguous": "#90a4ae",
}
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_proxy_store(path: Path) -> bool:
    """Whether ``path`` is a SQLite state file that holds proxied requests."""
    try:
        with path.open("rb") as fh:
            if fh.read(16) != _SQLITE_MAGIC:
                return False
    except OSError:
        return False
    try:
        store = open_store(path, readonly=True)
    except ConfigError:
        return False
    try:
        return bool(store.fetchone("SELECT 1 FROM sqlite_master WHERE name = 'proxy_requests'")) and has_requests(store)
    finally:
        store.close()


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def render_markdown(rows: Sequence[Rates], chart: str | None, *, source: str) -> str:
    """The report's Markdown: one row per model and quantization."""
    lines = [
        "# Parse-repair rates of proxied traffic",
        "",
        f"From `{source}`: every request `tooldispatch proxy` served, counted per model and quantization. Shares are "
        "of the call candidates the parser found (accepted: ok_strict, ok_fallback, repaired).",
        "",
        "| model | quant | requests | with tools | errors | calls | candidates | "
        + " | ".join(BUCKETS)
        + " | repairs | p50 latency |",
        "|" + "---|" * (9 + len(BUCKETS)),
    ]
    for r in rows:
        repairs = ", ".join(f"{k} {v}" for k, v in sorted(r.repairs.items())) or "-"
        p50 = f"{r.latency_p50_s * 1000:.1f} ms" if r.latency_p50_s is not None else "-"
        shares = " | ".join(f"{r.buckets[b]} ({_pct(r.rate(b))})" for b in BUCKETS)
        lines.append(
            f"| {r.model} | {r.quant} | {r.requests} | {r.tool_requests} | {r.errors} | {r.calls} | {r.candidates} | "
            f"{shares} | {repairs} | {p50} |"
        )
    if chart:
        lines += ["", f"![bucket shares per model]({chart})"]
    return "\n".join(lines) + "\n"


def _chart(rows: Sequence[Rates], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.6 * len(rows)))
    labels = [f"{r.model}@{r.quant}" for r in rows]
    left = [0.0] * len(rows)
    for bucket in BUCKETS:
        values = [100 * (r.rate(bucket) or 0.0) for r in rows]
        if any(values):
            ax.barh(labels, values, left=left, color=_COLORS[bucket], label=bucket, edgecolor="white")
            left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_xlim(0, 100)
    ax.invert_yaxis()
    ax.set_xlabel("share of call candidates (%)")
    ax.set_title("Proxied traffic: where each call candidate landed")
    ax.legend(title="bucket", loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_proxy_report(store_path: Path, out_dir: Path) -> list[Path]:
    """Write ``proxy.md`` and ``proxy_buckets.png`` for the traffic counted in ``store_path``; return the files."""
    store = open_store(store_path, readonly=True)
    try:
        rows = rates(store)
    finally:
        store.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    chart: str | None = None
    if any(r.candidates for r in rows):
        files.append(_chart([r for r in rows if r.candidates], out_dir / "proxy_buckets.png"))
        chart = files[-1].name
    markdown = out_dir / "proxy.md"
    markdown.write_text(render_markdown(rows, chart, source=str(store_path)), encoding="utf-8")
    return [markdown, *files]
