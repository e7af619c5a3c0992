#!/usr/bin/env bash
# vLLM with Qwen3-30B-A3B NVFP4 on a DGX Spark. Extra arguments go to `tooldispatch serve`, e.g.
#   scripts/serve-dgx-spark.sh --dry-run
#   scripts/serve-dgx-spark.sh --launcher container      # NVIDIA's NGC vLLM image instead of a native vllm
set -euo pipefail
source "$(dirname "$0")/_tooldispatch.sh"
exec "${tooldispatch[@]}" serve --profile dgx-spark-vllm-nvfp4 "$@"
