#!/usr/bin/env bash
# llama-cpp-python's OpenAI server with SmolLM2 on 127.0.0.1 (no GPU, no llama-server needed).
set -euo pipefail
source "$(dirname "$0")/_tooldispatch.sh"
"${tooldispatch[@]}" models pull smollm2-135m-instruct@Q4_1
exec "${tooldispatch[@]}" serve --profile local-llama-cpp-python "$@"
