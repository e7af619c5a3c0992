"""Re-score a recorded corpus with the current parser: no model, deterministic, and fast.

Comparing the summary of a replay with the one written when the corpus was recorded shows what a parser
change did to every rate, on exactly the same raw outputs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tooldispatch.bench.bfcl_data import BFCL_POLICY
from tooldispatch.bench.corpus import read_corpus
from tooldispatch.bench.report import RunSummary, summarize
from tooldispatch.bench.scoring import ParseFn
from tooldispatch.errors import ConfigError
from tooldispatch.policy import ToolPolicy


def replay_corpus(
    path: Path, *, parse: ParseFn | None = None, policy: ToolPolicy = BFCL_POLICY, meta: Mapping[str, Any] | None = None
) -> tuple[RunSummary, float, int]:
    """Score every output of a corpus; return the summary, the seconds it took, and the number of outputs.

    ``policy`` declares the cases' tools (default: BFCL's functions are read-only); ``meta`` is kept in the
    summary (a recorded run's commands and settings), with ``replayed`` naming the corpus.

    Raises:
        ConfigError: the corpus file does not exist or holds no BFCL outputs.
    """
    if not path.is_file():
        raise ConfigError(f"no corpus at {path}; a benchmark run writes RUN_DIR/corpus.jsonl")
    t0 = time.perf_counter()
    records = list(read_corpus(path))
    summary = summarize(records, meta={**(meta or {}), "replayed": str(path)}, parse=parse, policy=policy)
    seconds = time.perf_counter() - t0
    if not summary.cells:
        raise ConfigError(f"{path} holds no BFCL outputs to score")
    return summary, seconds, len(records)


def compare_summaries(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Lines saying how each cell's accuracy and false-positive rate moved, per mode, between two summaries."""
    lines: list[str] = []
    before = {c["cell"]: c for c in old.get("cells", [])}
    for cell in new.get("cells", []):
        prev = before.get(cell["cell"])
        if prev is None:
            lines.append(f"{cell['label']}: not in the earlier summary")
            continue
        for metric in ("accuracy", "false_positive"):
            moves = []
            for mode, now in cell[metric].items():
                was = prev[metric].get(mode, {}).get("value")
                if was is not None and abs(now["value"] - was) > 1e-12:
                    moves.append(f"{mode} {100 * was:.1f}→{100 * now['value']:.1f}")
            lines.append(f"{cell['label']} {metric}: " + (", ".join(moves) if moves else "unchanged"))
    return lines
