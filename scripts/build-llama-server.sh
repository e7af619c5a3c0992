#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the sources vendored in the llama-cpp-python sdist, so that
# `tooldispatch bench backend` compares against the very llama.cpp revision the in-process backend uses.
#
# Result: ~/.cache/tooldispatch/llama-server/bin/llama-server (override the root with LLAMA_SERVER_HOME).
# Usage:  scripts/build-llama-server.sh            (JOBS=4 scripts/build-llama-server.sh for more cores)
#
# The flags give a portable x86-64 build: a native build may enable AMX and die with "Illegal instruction".
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
HOME_DIR="${LLAMA_SERVER_HOME:-$HOME/.cache/tooldispatch/llama-server}"
JOBS="${JOBS:-2}"
PIP="${PIP:-python3 -m pip}"
if [[ -x "$(dirname "$0")/../.venv/bin/python" ]]; then
    PIP="$(dirname "$0")/../.venv/bin/python -m pip"
fi

src_root="$HOME_DIR/src"
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

cd "$tree/vendor/llama.cpp"
cmake -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
cmake --build build --target llama-server -j"$JOBS"

install -m 0755 build/bin/llama-server "$HOME_DIR/bin/llama-server"
echo "Built $HOME_DIR/bin/llama-server"
"$HOME_DIR/bin/llama-server" --version 2>&1 | head -n 2 || true
