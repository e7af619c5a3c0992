#!/usr/bin/env bash
# The Qwen2.5-Coder quantization ladder on an NVIDIA GPU: BFCL at 200 cases per category for every rung,
# through llama-server built with CUDA from the same vendored llama.cpp as the in-process backend, in both
# parse modes (the server's own tool_calls, and tooldispatch parsing the raw text).
#
# Steps:
#   1. build llama-server, llama-imatrix and llama-quantize with -DGGML_CUDA=ON (scripts/build-llama-server.sh);
#   2. pull each model and derive every rung (llama_model_quantize; importance-matrix types via llama-imatrix);
#   3. for each rung: start llama-server on 127.0.0.1 with all layers on the GPU, run `tooldispatch bench bfcl`
#      against it, stop it; the run folder resumes if interrupted;
#   4. on the agent rungs (AGENT_QUANTS), the same server also runs the agent benchmarks at full size: BFCL's
#      multi-turn categories (200 cases each) and the demo-world suite (three seeds at temperature 0.7), each with
#      every cut of the runtime (bench/cuts.py), into RUN_DIR/agent and RUN_DIR/suite;
#   5. write the report (Markdown, PNG charts, corpus) into the run folder.
#
# Usage:  scripts/gpu-ladder.sh [RUN_DIR]            (default runs/gpu-ladder)
# Environment:
#   MODELS="qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct"   models to run
#   QUANTS="Q8_0 Q6_K ... IQ2_M"   rungs (default: the whole ladder below)
#   LIMIT=200                      cases per category
#   CATEGORIES=simple_python,multiple,parallel,irrelevance
#   AGENT_QUANTS="Q4_K_M Q2_K"     rungs that also run the agent benchmarks ("" for none)
#   AGENT_CATEGORIES=multi_turn_base,multi_turn_miss_param,multi_turn_miss_func,multi_turn_long_context
#   AGENT_LIMIT=200                cases per multi-turn category
#   CUTS=full,no-repair,strict-parsing,bare-feedback,no-repeat-guard,answer-tool
#   PORT=18080                     loopback port for llama-server
#   DRY_RUN=1                      print every command instead of running it (no GPU needed)
set -euo pipefail
scripts_dir="$(cd "$(dirname "$0")" && pwd)"
source "$scripts_dir/_tooldispatch.sh"

RUN_DIR="${1:-runs/gpu-ladder}"
MODELS="${MODELS:-qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct}"
QUANTS="${QUANTS:-Q4_K_M Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_S Q4_0 IQ4_XS IQ4_NL Q3_K_M Q3_K_S Q2_K IQ3_XXS IQ3_S IQ2_M}"
LIMIT="${LIMIT:-200}"
CATEGORIES="${CATEGORIES:-simple_python,multiple,parallel,irrelevance}"
AGENT_QUANTS="${AGENT_QUANTS-Q4_K_M Q2_K}"
AGENT_CATEGORIES="${AGENT_CATEGORIES:-multi_turn_base,multi_turn_miss_param,multi_turn_miss_func,multi_turn_long_context}"
AGENT_LIMIT="${AGENT_LIMIT:-200}"
CUTS="${CUTS:-full,no-repair,strict-parsing,bare-feedback,no-repeat-guard,answer-tool}"
PORT="${PORT:-18080}"
CUDA_HOME_DIR="${LLAMA_CUDA_HOME:-$HOME/.cache/tooldispatch/llama-cuda}"
DRY_RUN="${DRY_RUN:-0}"

run() {
    if [[ "$DRY_RUN" == 1 ]]; then
        printf '+ %s\n' "$*"
    else
        "$@"
    fi
}

if [[ "$DRY_RUN" != 1 ]] && ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "error: no NVIDIA GPU here (nvidia-smi not found); run with DRY_RUN=1 to see the plan" >&2
    exit 2
fi
if ! [[ "$LIMIT" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: LIMIT must be a positive number of cases, got '$LIMIT'" >&2
    exit 2
fi
if ! [[ "$AGENT_LIMIT" =~ ^[1-9][0-9]*$ ]]; then
    echo "error: AGENT_LIMIT must be a positive number of cases, got '$AGENT_LIMIT'" >&2
    exit 2
fi

run env LLAMA_SERVER_HOME="$CUDA_HOME_DIR" BUILD_DIR=build-cuda CMAKE_EXTRA="-DGGML_CUDA=ON" \
    JOBS="${JOBS:-8}" "$scripts_dir/build-llama-server.sh"
server="$CUDA_HOME_DIR/bin/llama-server"

for model in $MODELS; do
    for quant in $QUANTS; do
        spec="$model@$quant"
        # pull the shipped file, or derive the rung (the imatrix types use the CUDA-built tools)
        run env LLAMA_SERVER_HOME="$CUDA_HOME_DIR" "${tooldispatch[@]}" models pull "$spec"
        if [[ "$DRY_RUN" == 1 ]]; then
            path="<cache>/$model/$quant.gguf"
        else
            path="$("${tooldispatch[@]}" models pull "$spec" 2>/dev/null | tail -n 1)"
        fi
        # 32k: the multi-turn conversations (long_context above all) outgrow the single-turn prompts' 8k.
        serve=("$server" -m "$path" --host 127.0.0.1 --port "$PORT" -ngl 999 -fa on -c 32768 -np 1 --jinja
            --no-webui --log-disable)
        if [[ "$DRY_RUN" == 1 ]]; then
            run "${serve[@]}"
        else
            "${serve[@]}" &
            pid=$!
            trap 'kill "$pid" 2>/dev/null || true' EXIT
            for _ in $(seq 1 180); do
                curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break
                sleep 1
            done
        fi
        run "${tooldispatch[@]}" bench bfcl --backend openai --dialect llama-server \
            --base-url "http://127.0.0.1:$PORT/v1" --models "$model" --quant-label "$quant" \
            --parse-modes client,server --categories "$CATEGORIES" --limit "$LIMIT" --run-dir "$RUN_DIR" \
            --no-progress
        if [[ " $AGENT_QUANTS " == *" $quant "* ]]; then
            served=(--backend openai --dialect llama-server --base-url "http://127.0.0.1:$PORT/v1" --models "$model"
                --quant-label "$quant")
            run "${tooldispatch[@]}" bench bfcl "${served[@]}" --categories "$AGENT_CATEGORIES" \
                --limit "$AGENT_LIMIT" --cuts "$CUTS" --run-dir "$RUN_DIR/agent"
            run "${tooldispatch[@]}" bench suite "${served[@]}" --cuts "$CUTS" --seeds 0,1,2 --temperature 0.7 \
                --run-dir "$RUN_DIR/suite"
        fi
        if [[ "$DRY_RUN" != 1 ]]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            trap - EXIT
        fi
    done
done
run "${tooldispatch[@]}" report "$RUN_DIR"
