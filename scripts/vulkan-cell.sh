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
source "$(dirname "$0")/_llama-server.sh"

RUN_DIR="${1:-runs/vulkan-cell}"
LIMIT="${LIMIT:-20}"
PARSE_MODES="${PARSE_MODES:-server}"
MODEL=qwen2.5-coder-0.5b-instruct
SERVER="${LLAMA_SERVER_VULKAN:-${LLAMA_SERVER_VULKAN_HOME:-$HOME/.cache/tooldispatch/llama-server-vulkan}/bin/llama-server}"
PORT="${PORT:-18081}"
if [[ ! -x "$SERVER" ]]; then
    echo "No Vulkan llama-server at $SERVER: scripts/build-llama-server.sh --vulkan builds one," \
        "scripts/fetch-llama-server-vulkan.sh fetches one." >&2
    exit 2
fi
gguf="$("${tooldispatch[@]}" models pull "$MODEL@Q4_K_M" | tail -n 1)"
mkdir -p "$RUN_DIR"

# $1: the label's device (cpu or vulkan); $2: GGML_VK_VISIBLE_DEVICES (empty: no Vulkan device, the CPU runs all).
run_cell() {
    local device="$1" visible="$2" log="$RUN_DIR/llama-server-$device.log"
    start_llama_server "$log" "$PORT" env GGML_VK_VISIBLE_DEVICES="$visible" LLAMA_ARG_LOG_VERBOSITY=4 \
        "$SERVER" -m "$gguf" --jinja -ngl 999 -fa on -c 8192 -np 1 -t 2 --host 127.0.0.1 --port "$PORT"
    grep -E "using device|offloaded|model buffer size" "$log" || true
    "${tooldispatch[@]}" bench bfcl --backend openai --dialect llama-server --base-url "http://127.0.0.1:$PORT/v1" \
        --models "$MODEL" --quant-label "Q4_K_M-$device" --parse-modes "$PARSE_MODES" --concurrency 1 \
        --categories simple_python --limit "$LIMIT" --run-dir "$RUN_DIR" --no-progress
    stop_llama_server
}

run_cell cpu ""
run_cell vulkan "${GGML_VK_VISIBLE_DEVICES:-0}"
"${tooldispatch[@]}" report "$RUN_DIR"
