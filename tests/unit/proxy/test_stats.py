"""Counting proxied requests: rows from parse outcomes, batched writes, rates per model, the report."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.proxy.report import is_proxy_store, render_markdown, write_proxy_report
from tooldispatch.proxy.stats import Recorder, RequestStats, rates
from tooldispatch.store import MIGRATIONS, Store

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]


def stats(model: str = "qwen", quant: str = "Q4_K_M", text: str = "", **kw: object) -> RequestStats:
    """A counted request whose outcome is the parse of ``text``."""
    row = RequestStats(id=f"r{id(text)}{model}{quant}{len(text)}", model=model, quant=quant, engine="llama.cpp",
                       mode="client", stream=False, tools=1, tool_choice="auto", **kw)  # type: ignore[arg-type]  # fmt: skip
    outcome = parse_tool_calls(text, TOOLS)
    row.count(outcome, len(outcome.calls))
    return row


def test_the_migration_is_named_and_portable() -> None:
    """The proxy's tables come from one named migration without SQLite-only syntax."""
    migration = next(m for m in MIGRATIONS if m.name == "proxy_0001_requests")
    assert "AUTOINCREMENT" not in migration.sql.upper() and "PRAGMA" not in migration.sql.upper()
    store = Store()
    assert store.fetchone("SELECT COUNT(*) FROM proxy_requests") == (0,)
    assert store.fetchone("SELECT COUNT(*) FROM proxy_records") == (0,)


def test_count_takes_buckets_repairs_formats_and_flags() -> None:
    """A repaired call and a rejected one give one row with both buckets, the repair kind and the format."""
    row = stats(
        text='<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "CELSIUS"}}</tool_call>'
        '<tool_call>{"name": "launch", "arguments": {}}</tool_call>'
    )
    assert (row.calls, row.stage, row.formats) == (1, "repair", "hermes")
    assert dict(row.buckets) == {"repaired": 1, "UnknownName": 1}
    assert dict(row.repairs) == {"enum": 1}
    empty = stats(text="no call here")
    assert (empty.calls, empty.flags, dict(empty.buckets)) == (0, "no_call", {})


def test_recorder_writes_in_batches_and_rates_group_per_model_and_quant(tmp_path: Path) -> None:
    """Queued rows reach the store on flush; rates sum buckets per model and quantization, busiest first."""
    store = Store(tmp_path / "s.db")
    recorder = Recorder(store)
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    fixed = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Oslo',}}</tool_call>"
    for row in (stats(text=good), stats(text=fixed), stats(text="x", status=502, error="upstream_error")):
        recorder.add(row)
    recorder.add(stats(model="qwen", quant="Q8_0", text=good))
    assert store.fetchone("SELECT COUNT(*) FROM proxy_requests") == (0,)
    assert recorder.flush() == 4
    first, second = rates(store)
    assert (first.model, first.quant, first.requests, first.errors, first.calls) == ("qwen", "Q4_K_M", 3, 1, 2)
    assert first.buckets["ok_strict"] == 1 and first.candidates == 2
    assert first.rate("ok_strict") == 0.5
    assert (second.quant, second.requests, second.rate("ok_strict")) == ("Q8_0", 1, 1.0)
    store.close()


def test_background_flush_and_stop_write_everything(tmp_path: Path) -> None:
    """Started in a loop, the recorder writes queued rows by itself, and stop() writes the rest."""
    store = Store(tmp_path / "s.db")

    async def run() -> None:
        recorder = Recorder(store, interval_s=0.01)
        recorder.start()
        recorder.add(stats(text="a"))
        await asyncio.sleep(0.2)
        assert store.fetchone("SELECT COUNT(*) FROM proxy_requests") == (1,)
        recorder.add(stats(text="bb"))
        await recorder.stop()

    asyncio.run(run())
    assert store.fetchone("SELECT COUNT(*) FROM proxy_requests") == (2,)
    store.close()


def test_report_writes_markdown_and_chart(tmp_path: Path) -> None:
    """The report of a proxy's state file is a Markdown table per model and quant plus a PNG of bucket shares."""
    path = tmp_path / "state.db"
    store = Store(path)
    recorder = Recorder(store)
    recorder.add(stats(text='<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'))
    recorder.flush()
    rows = rates(store)
    store.close()
    assert is_proxy_store(path) and not is_proxy_store(tmp_path / "missing.db")
    files = write_proxy_report(path, tmp_path / "report")
    assert [f.name for f in files] == ["proxy.md", "proxy_buckets.png"]
    assert files[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert files[0].read_text() == render_markdown(rows, "proxy_buckets.png", source=str(path))
    assert "| qwen | Q4_K_M | 1 | 1 | 0 | 1 | 1 | 1 (100.0%) |" in files[0].read_text()


def test_a_call_in_mid_prose_is_counted_and_stored_as_ambiguous(tmp_path: Path) -> None:
    """A candidate kept as Ambiguous (never answered) has its own column, summed in the rates."""
    text = 'First I note this: {"name": "get_weather", "arguments": {"city": "Oslo"}}. It is usually cold there.'
    row = stats(text=text)
    assert (row.calls, dict(row.buckets)) == (0, {"Ambiguous": 1})
    store = Store(tmp_path / "s.db")
    recorder = Recorder(store)
    recorder.add(row)
    assert recorder.flush() == 1
    assert store.fetchone("SELECT ambiguous, ok_strict FROM proxy_requests") == (1, 0)
    (only,) = rates(store)
    assert (only.candidates, only.rate("Ambiguous")) == (1, 1.0)
    store.close()
