#!/usr/bin/env bash
# Rebuild src/tooldispatch/data/models/calibration/calibration.txt, the text llama-imatrix reads to weigh each weight's importance
# before the importance-matrix quantizations (IQ3_XXS, IQ3_S, IQ2_M ...).
#
# It is this repository's own prose and code (Apache-2.0, like the rest of the repository): the architecture
# notes, the README, and Python sources that talk about tools, calls, schemas and dispatch, the domain the
# quantized models are measured on. No benchmark data goes in (calibrating on BFCL would favour the test).
set -euo pipefail
cd "$(dirname "$0")/.."
out=src/tooldispatch/data/models/calibration/calibration.txt
{
    cat README.md docs/architecture.md
    for f in src/tooldispatch/agent/loop.py src/tooldispatch/dispatch/registry.py \
        src/tooldispatch/prompting/formats.py src/tooldispatch/tools/demo/_world.py \
        src/tooldispatch/tools/demo/_registry.py src/tooldispatch/parsing/lenient.py; do
        printf '\n# file: %s\n' "$f"
        cat "$f"
    done
} >"$out"
wc -c "$out"
