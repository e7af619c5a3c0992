#!/usr/bin/env python3
"""Two cells of a benchmark corpus side by side, case by case: identical outputs and time per case.

    python3 scripts/pair-outputs.py docs/results/qwen25-coder-ladder/vulkan/corpus.jsonl Q4_K_M-cpu Q4_K_M-vulkan

A cell is picked by its quantization label (the corpus's ``quant``); with several parse modes in the corpus, add
``--parse-mode``. An output is identical when its raw text and native calls are the same byte for byte. The
accuracy difference with its interval is in the run's report (``tooldispatch report``), which pairs the same cases.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def cell(rows: list[dict[str, Any]], quant: str, parse_mode: str | None) -> dict[str, dict[str, Any]]:
    """The cell's outputs by case id."""
    return {
        r["case_id"]: r
        for r in rows
        if r["quant"] == quant and (parse_mode is None or r["parse_mode"] == parse_mode)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("a", help="quantization label of the first cell (the reference)")
    parser.add_argument("b", help="quantization label of the second cell")
    parser.add_argument("--parse-mode", default=None)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    a, b = cell(rows, args.a, args.parse_mode), cell(rows, args.b, args.parse_mode)
    both = sorted(set(a) & set(b), key=lambda c: (len(c), c))
    if not both:
        raise SystemExit(f"no case is in both {args.a!r} and {args.b!r}")
    same = [c for c in both if (a[c]["text"], a[c]["native_calls"]) == (b[c]["text"], b[c]["native_calls"])]
    print(f"{len(both)} cases in both cells; identical outputs: {len(same)} of {len(both)}")
    for c in both:
        mark = "same" if c in same else "DIFFERENT"
        print(f"  {c}: {mark}; {a[c]['latency_s']:.1f} s vs {b[c]['latency_s']:.1f} s")
    for label, cases in ((args.a, a), (args.b, b)):
        times = [cases[c]["latency_s"] for c in both]
        print(f"{label}: median {statistics.median(times):.1f} s a case, {sum(times):.0f} s in all")


if __name__ == "__main__":
    main()
