#!/usr/bin/env bash
# The Vulkan cell of docs/results/qwen25-coder-ladder/vulkan/: Qwen2.5-Coder-0.5B Q4_K_M on BFCL simple_python
# through the Vulkan llama-server of scripts/fetch-llama-server-vulkan.sh, once with every layer on the Vulkan
# device (Mesa's lavapipe here, a Radeon on a Strix Halo) and once with the same binary on the CPU, into one run
# folder, so the report pairs the two case by case (label Q4_K_M-cpu is the reference, Q4_K_M-vulkan the other).
# Same binary, same flags, same file: what differs is the device the layers run on.
#
# Usage:  scripts/vulkan-cell.sh [RUN_DIR]        (default runs/vulkan-cell; rerunning resumes)
#         LIMIT=20 cases (lavapipe takes one to two minutes a case on two cores), PARSE_MODES=server
set -euo pipefail
source "$(dirname "$0")/_tooldispatch.sh"

RUN_DIR="${1:-runs/vulkan-cell}"
LIMIT="${LIMIT:-20}"
PARSE_MODES="${PARSE_MODES:-server}"
MODEL=qwen2.5-coder-0.5b-instruct
SERVER="${LLAMA_SERVER_VULKAN:-${LLAMA_SERVER_VULKAN_HOME:-$HOME/.cache/tooldispatch/llama-server-vulkan}/bin/llama-server}"
PORT="${PORT:-18081}"
if [[ ! -x "$SERVER" ]]; then
    echo "No Vulkan llama-server at $SERVER: run scripts/fetch-llama-server-vulkan.sh first." >&2
    exit 2
fi
gguf="$("${tooldispatch[@]}" models pull "$MODEL@Q4_K_M" | tail -n 1)"
mkdir -p "$RUN_DIR"

server_pid=""
stop_server() {
    if [[ -n "$server_pid" ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
trap stop_server EXIT

# $1: the label's device (cpu or vulkan); $2: GGML_VK_VISIBLE_DEVICES (empty: no Vulkan device, the CPU runs all).
run_cell() {
    local device="$1" visible="$2"
    GGML_VK_VISIBLE_DEVICES="$visible" LLAMA_ARG_LOG_VERBOSITY=4 "$SERVER" -m "$gguf" --jinja -ngl 999 -fa on \
        -c 8192 -np 1 -t 2 --host 127.0.0.1 --port "$PORT" >"$RUN_DIR/llama-server-$device.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        if curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "llama-server exited at start: see $RUN_DIR/llama-server-$device.log" >&2
            server_pid=""
            return 1
        fi
        sleep 1
    done
    grep -E "using device|offloaded|model buffer size" "$RUN_DIR/llama-server-$device.log" || true
    "${tooldispatch[@]}" bench bfcl --backend openai --dialect llama-server --base-url "http://127.0.0.1:$PORT/v1" \
        --models "$MODEL" --quant-label "Q4_K_M-$device" --parse-modes "$PARSE_MODES" --concurrency 1 \
        --categories simple_python --limit "$LIMIT" --run-dir "$RUN_DIR" --no-progress
    stop_server
}

run_cell cpu ""
run_cell vulkan "${GGML_VK_VISIBLE_DEVICES:-0}"
"${tooldispatch[@]}" report "$RUN_DIR"
