#!/usr/bin/env bash
# llama-server with Qwen3-30B-A3B Q4_K_M on AMD Strix Halo. First argument: vulkan (default) or rocm; the rest go to
# `tooldispatch serve`, e.g.
#   scripts/serve-strix-halo.sh vulkan --dry-run
#   scripts/serve-strix-halo.sh rocm --launcher toolbox --port 8081
set -euo pipefail
flavour="${1:-vulkan}"
if [ "$#" -gt 0 ]; then shift; fi
case "$flavour" in
    vulkan|rocm) ;;
    *) echo "usage: $0 [vulkan|rocm] [tooldispatch serve options]" >&2; exit 2 ;;
esac
source "$(dirname "$0")/_tooldispatch.sh"
exec "${tooldispatch[@]}" serve --profile "strix-halo-$flavour" "$@"
