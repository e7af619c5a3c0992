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
#
# The flags give a portable x86-64 build: a native build may enable AMX and die with "Illegal instruction".
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
HOME_DIR="${LLAMA_SERVER_HOME:-$HOME/.cache/tooldispatch/llama-server}"
JOBS="${JOBS:-2}"
TARGETS="${TARGETS:-llama-server llama-imatrix llama-quantize}"
BUILD_DIR="${BUILD_DIR:-build}"
# shellcheck disable=SC2206  # CMAKE_EXTRA is a list of flags, split on purpose
EXTRA=(${CMAKE_EXTRA:-})
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
cmake -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF "${EXTRA[@]}"
# shellcheck disable=SC2086  # TARGETS is a list of target names
cmake --build "$BUILD_DIR" --target $TARGETS -j"$JOBS"

for target in $TARGETS; do
    install -m 0755 "$BUILD_DIR/bin/$target" "$HOME_DIR/bin/$target"
    echo "Built $HOME_DIR/bin/$target"
done
"$HOME_DIR/bin/llama-server" --version 2>&1 | head -n 2 || true
