"""One benchmark invocation from start to files: open the run folder, run what is missing, export, report.

The run folder holds ``bench.db`` (the results, the source of truth), ``corpus.jsonl`` (every raw output,
exported from the database after each invocation) and ``report/`` (Markdown, charts, JSON).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import CORPUS_NAME, write_corpus
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import RunOptions, RunResult, Target, check_targets, run_bfcl
from tooldispatch.errors import ConfigError

REPORT_DIR = "report"

_PINNED = ("categories", "limit", "max_tokens", "temperature", "seeds")


def check_meta(db: ResultsDB, meta: Mapping[str, Any]) -> None:
    """Refuse to mix results made under different settings in one run folder.

    Raises:
        ConfigError: the folder holds results made with other categories, limit, budget, temperature or seeds.
    """
    old = db.meta()
    if not old:
        return
    changed = [k for k in _PINNED if k in old and old[k] != meta.get(k)]
    if changed:
        was = ", ".join(f"{k}={old[k]!r}" for k in changed)
        raise ConfigError(
            f"{db.run_dir} holds results made with {was}; rerun with those settings to resume it, "
            "or pass another --run-dir"
        )


def run_session(
    targets: Sequence[Target],
    cases: Sequence[BfclCase],
    run_dir: Path,
    options: RunOptions,
    *,
    meta: Mapping[str, Any],
    progress: bool = True,
    console: Console | None = None,
    interleave_cells: bool = False,
) -> RunResult:
    """Run the matrix into ``run_dir`` (resuming what is there), then export the corpus.

    With ``interleave_cells`` every cell's backend is opened at once and cases run case by case across cells.

    Raises:
        ConfigError: the run folder was started with other settings, or the matrix repeats a cell.
    """
    check_targets(targets)
    db = ResultsDB(run_dir)
    try:
        check_meta(db, meta)
        merged = dict(db.meta())
        cells = list(dict.fromkeys([*merged.get("cells", []), *(t.cell.key for t in targets)]))
        commands = list(merged.get("commands", [merged["command"]] if "command" in merged else []))
        if meta.get("command") and meta["command"] not in commands:
            commands.append(meta["command"])
        db.record_meta("bfcl", {**merged, **meta, "cells": cells, "commands": commands})
        result = _run_with_progress(
            targets, cases, db, options, progress=progress, console=console, interleave_cells=interleave_cells
        )
        write_corpus(run_dir / CORPUS_NAME, db.records())
        return result
    finally:
        db.close()


def _run_with_progress(
    targets: Sequence[Target],
    cases: Sequence[BfclCase],
    db: ResultsDB,
    options: RunOptions,
    *,
    progress: bool,
    console: Console | None,
    interleave_cells: bool,
) -> RunResult:
    if not progress:
        return asyncio.run(run_bfcl(targets, cases, db, options, interleave_cells=interleave_cells))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console or Console(stderr=True), transient=False) as bar:
        ids: dict[str, Any] = {}

        def start(key: str, done: int, total: int) -> None:
            ids[key] = bar.add_task(key, total=total, completed=done)

        def step(key: str, done: int, total: int) -> None:
            bar.update(ids[key], completed=done)

        return asyncio.run(
            run_bfcl(
                targets, cases, db, options, on_progress=step, on_cell_start=start, interleave_cells=interleave_cells
            )
        )


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn`` and return its result with the seconds it took."""
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0
