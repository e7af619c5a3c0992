#!/usr/bin/env bash
# Build llama.cpp's `llama-server`, `llama-imatrix` and `llama-quantize` from the sources vendored in the
# llama-cpp-python sdist, so that `tooldispatch bench backend`, the llama-server cells of the benchmark and the
# importance-matrix quantizations (`tooldispatch models quantize NAME@IQ3_XXS`) all use the very llama.cpp
# revision the in-process backend uses.
#
# Result: ~/.cache/tooldispatch/llama-server/bin/{llama-server,llama-imatrix,llama-quantize}
#         (override the root with LLAMA_SERVER_HOME; TARGETS="llama-server" builds only the server).
# Usage:  scripts/build-llama-server.sh            (JOBS=4 scripts/build-llama-server.sh for more cores)
#         CMAKE_EXTRA="-DGGML_CUDA=ON" adds flags (scripts/gpu-ladder.sh builds a CUDA tree this way).
#         scripts/build-llama-server.sh --vulkan   the Vulkan llama-server (the strix-halo-vulkan profile's), into
#                                                  ~/.cache/tooldispatch/llama-server-vulkan/bin; the CPU build stays.
#
# --vulkan needs a Vulkan loader and glslc (Debian: libvulkan-dev glslc spirv-headers) and Vulkan headers newer than
# Debian 12's 1.3.239, which stop ggml-vulkan.cpp at "'LayerSettingEXT' is not a member of 'vk'". The script takes
# the headers (and only the headers) out of Debian 13's libvulkan-dev package, or from VULKAN_INCLUDE_DIR when set.
# A glslc without GL_EXT_integer_dot_product or the cooperative-matrix extensions (Debian 12's shaderc 2023.2) builds
# a backend without those shaders: correct, slower on GPUs that have them; the configure step says which are missing.
#
# The flags give a portable x86-64 build: a native build may enable AMX and die with "Illegal instruction".
set -euo pipefail

VULKAN=""
if [[ "${1:-}" == "--vulkan" ]]; then
    VULKAN=1
elif [[ $# -gt 0 ]]; then
    echo "usage: $0 [--vulkan]" >&2
    exit 2
fi
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
SRC_HOME="${LLAMA_SERVER_HOME:-$HOME/.cache/tooldispatch/llama-server}"
HOME_DIR="$SRC_HOME"
JOBS="${JOBS:-2}"
TARGETS="${TARGETS:-llama-server llama-imatrix llama-quantize}"
BUILD_DIR="${BUILD_DIR:-build}"
# shellcheck disable=SC2206  # CMAKE_EXTRA is a list of flags, split on purpose
EXTRA=(${CMAKE_EXTRA:-})
if [[ -n "$VULKAN" ]]; then
    HOME_DIR="${LLAMA_SERVER_VULKAN_HOME:-$HOME/.cache/tooldispatch/llama-server-vulkan}"
    TARGETS="llama-server"
    BUILD_DIR="build-vulkan"
    EXTRA+=(-DGGML_VULKAN=ON)
fi
PIP="${PIP:-python3 -m pip}"
if [[ -x "$(dirname "$0")/../.venv/bin/python" ]]; then
    PIP="$(dirname "$0")/../.venv/bin/python -m pip"
fi

src_root="$SRC_HOME/src"
mkdir -p "$src_root" "$HOME_DIR/bin"

sdist="$(ls "$src_root"/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)"
if [[ -z "$sdist" ]]; then
    echo "Downloading the llama-cpp-python $VERSION sdist ..."
    $PIP download --no-deps --no-binary :all: --dest "$src_root" "llama-cpp-python==$VERSION"
    sdist="$src_root/llama_cpp_python-$VERSION.tar.gz"
fi

tree="$src_root/llama_cpp_python-$VERSION"
if [[ ! -d "$tree/vendor/llama.cpp" ]]; then
    tar -xzf "$sdist" -C "$src_root"
fi

if [[ -n "$VULKAN" ]]; then
    include="${VULKAN_INCLUDE_DIR:-}"
    if [[ -z "$include" ]]; then
        deb="libvulkan-dev_1.4.309.0-1_amd64.deb"
        headers="$src_root/vulkan-headers-1.4.309"
        if [[ ! -f "$headers/usr/include/vulkan/vulkan.hpp" ]]; then
            echo "Downloading Vulkan headers 1.4.309 (Debian 13's $deb) ..."
            curl -fsSL -o "$src_root/$deb" "http://deb.debian.org/debian/pool/main/v/vulkan-loader/$deb"
            mkdir -p "$headers"
            (cd "$headers" && ar p "$src_root/$deb" data.tar.xz | tar -xJ ./usr/include)
        fi
        include="$headers/usr/include"
    fi
    EXTRA+=("-DVulkan_INCLUDE_DIR=$include")
fi

cd "$tree/vendor/llama.cpp"
cmake -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF "${EXTRA[@]}"
# shellcheck disable=SC2086  # TARGETS is a list of target names
cmake --build "$BUILD_DIR" --target $TARGETS -j"$JOBS"

if [[ -n "$VULKAN" ]]; then
    rm -rf "$HOME_DIR/bin" "$HOME_DIR/licenses" "$HOME_DIR/REVISION"  # nothing left of an earlier build or fetch
    mkdir -p "$HOME_DIR/bin"
fi
for target in $TARGETS; do
    install -m 0755 "$BUILD_DIR/bin/$target" "$HOME_DIR/bin/$target"
    echo "Built $HOME_DIR/bin/$target"
done
"$HOME_DIR/bin/llama-server" --version 2>&1 | head -n 2 || true
if [[ -n "$VULKAN" ]]; then
    commit="$("$HOME_DIR/bin/llama-server" --version 2>&1 | sed -n 's/.*commit \([0-9a-f]*\).*/\1/p' | head -n 1)"
    printf 'llama.cpp commit %s, vendored in llama-cpp-python %s, built with -DGGML_VULKAN=ON\n' "${commit:-unknown}" \
        "$VERSION" >"$HOME_DIR/REVISION"
    echo "Vulkan devices it sees (GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}):"
    GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}" "$HOME_DIR/bin/llama-server" --list-devices 2>&1 \
        | sed -n '/Available devices/,$p'
fi
