#!/usr/bin/env bash
# The committed CPU run of docs/results/qwen25-coder-ladder/: BFCL simple_python, multiple, parallel and
# irrelevance, 40 cases per category per cell, greedy, in-process llama.cpp on two threads. Cells run one
# after another into one run folder (so quantizations are paired by case); rerunning resumes where it stopped.
#
# Usage:  nice -n 15 scripts/cpu-ladder.sh [RUN_DIR]        (default runs/qwen25-coder-ladder)
#         CELLS="..." overrides the cell list (NAME@QUANT:off|on|server, run in this order).
#
# A cell NAME@QUANT:off|on runs in process with llama.cpp's grammar constraint off or on. NAME@QUANT:server runs
# the same cases through llama.cpp's own llama-server (scripts/build-llama-server.sh; --jinja, so the model's
# template renders the tools) in both parse modes: the server's `tool_calls` and client parsing of its raw text.
# One request at a time on one slot with two threads, as the in-process cells run.
set -euo pipefail
source "$(dirname "$0")/_tooldispatch.sh"
source "$(dirname "$0")/_llama-server.sh"

RUN_DIR="${1:-runs/qwen25-coder-ladder}"
LIMIT="${LIMIT:-40}"
CATEGORIES="${CATEGORIES:-simple_python,multiple,parallel,irrelevance}"
Q05=qwen2.5-coder-0.5b-instruct
Q15=qwen2.5-coder-1.5b-instruct
# The importance-matrix cell comes last: it needs llama-imatrix and llama-quantize (scripts/build-llama-server.sh).
CELLS="${CELLS:-$Q05@Q4_K_M:off $Q05@Q4_K_M:server $Q05@Q4_K_M:on $Q05@Q4_0:off $Q05@Q3_K_M:off $Q05@Q2_K:off $Q15@Q4_K_M:off $Q15@Q2_K:off $Q05@IQ3_XXS:off}"
LLAMA_SERVER="${LLAMA_SERVER:-${LLAMA_SERVER_HOME:-$HOME/.cache/tooldispatch/llama-server}/bin/llama-server}"
PORT="${PORT:-18080}"

run_server_cell() {
    local spec="$1" gguf="$2"
    if [[ ! -x "$LLAMA_SERVER" ]]; then
        echo "No llama-server at $LLAMA_SERVER: build it with scripts/build-llama-server.sh (cell $spec skipped)." >&2
        return 0
    fi
    mkdir -p "$RUN_DIR"
    start_llama_server "$RUN_DIR/llama-server.log" "$PORT" \
        "$LLAMA_SERVER" -m "$gguf" --jinja --host 127.0.0.1 --port "$PORT" -c 8192 -np 1 -t 2
    "${tooldispatch[@]}" bench bfcl --backend openai --dialect llama-server --base-url "http://127.0.0.1:$PORT/v1" \
        --models "${spec%%@*}" --quant-label "${spec##*@}" --parse-modes server,client --concurrency 1 \
        --categories "$CATEGORIES" --limit "$LIMIT" --run-dir "$RUN_DIR" --no-progress
    stop_llama_server
}

for cell in $CELLS; do
    spec="${cell%%:*}"
    mode="${cell##*:}"
    gguf="$("${tooldispatch[@]}" models pull "$spec" | tail -n 1)"
    if [[ "$mode" == "server" ]]; then
        run_server_cell "$spec" "$gguf"
        continue
    fi
    "${tooldispatch[@]}" bench bfcl --models "$spec" --constrained "$mode" --categories "$CATEGORIES" \
        --limit "$LIMIT" --n-threads 2 --run-dir "$RUN_DIR" --no-progress
done
"${tooldispatch[@]}" report "$RUN_DIR"
