#!/usr/bin/env bash
# The committed CPU run of docs/results/qwen25-coder-ladder/: BFCL simple_python, multiple, parallel and
# irrelevance, 40 cases per category per cell, greedy, in-process llama.cpp on two threads. Cells run one
# after another into one run folder (so quantizations are paired by case); rerunning resumes where it stopped.
#
# Usage:  nice -n 15 scripts/cpu-ladder.sh [RUN_DIR]        (default runs/qwen25-coder-ladder)
#         CELLS="..." overrides the cell list (NAME@QUANT[:constrained], run in this order).
set -euo pipefail
source "$(dirname "$0")/_tooldispatch.sh"

RUN_DIR="${1:-runs/qwen25-coder-ladder}"
LIMIT="${LIMIT:-40}"
CATEGORIES="${CATEGORIES:-simple_python,multiple,parallel,irrelevance}"
Q05=qwen2.5-coder-0.5b-instruct
Q15=qwen2.5-coder-1.5b-instruct
# The importance-matrix cell comes last: it needs llama-imatrix and llama-quantize (scripts/build-llama-server.sh).
CELLS="${CELLS:-$Q05@Q4_K_M:off $Q05@Q4_K_M:on $Q05@Q4_0:off $Q05@Q3_K_M:off $Q05@Q2_K:off $Q15@Q4_K_M:off $Q15@Q2_K:off $Q05@IQ3_XXS:off}"

for cell in $CELLS; do
    spec="${cell%%:*}"
    constrained="${cell##*:}"
    "${tooldispatch[@]}" models pull "$spec" >/dev/null
    "${tooldispatch[@]}" bench bfcl --models "$spec" --constrained "$constrained" --categories "$CATEGORIES" \
        --limit "$LIMIT" --n-threads 2 --run-dir "$RUN_DIR" --no-progress
done
"${tooldispatch[@]}" report "$RUN_DIR"
