"""scripts/gpu-ladder.sh: the plan it runs on an NVIDIA machine, checked here without a GPU (DRY_RUN=1)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[3] / "scripts" / "gpu-ladder.sh"


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HOME": "/home/u", **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, check=False, timeout=30
    )


def test_dry_run_prints_build_pull_serve_bench_and_report() -> None:
    """The plan: a CUDA build, then per rung pull, llama-server with all layers on the GPU, BFCL at 200 cases."""
    env = {"DRY_RUN": "1", "MODELS": "qwen2.5-coder-0.5b-instruct", "QUANTS": "Q4_K_M IQ3_XXS", "PORT": "18111"}
    proc = _run(env, "runs/g")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("+ ")]
    assert lines[0].startswith("+ env LLAMA_SERVER_HOME=/home/u/.cache/tooldispatch/llama-cuda BUILD_DIR=build-cuda ")
    assert "CMAKE_EXTRA=-DGGML_CUDA=ON" in lines[0] and lines[0].endswith("scripts/build-llama-server.sh")
    assert [line.split(" models pull ")[1] for line in lines if " models pull " in line] == [
        "qwen2.5-coder-0.5b-instruct@Q4_K_M",
        "qwen2.5-coder-0.5b-instruct@IQ3_XXS",
    ]
    serve = [line for line in lines if "llama-cuda/bin/llama-server -m" in line]
    assert serve[1].endswith(
        "-m <cache>/qwen2.5-coder-0.5b-instruct/IQ3_XXS.gguf --host 127.0.0.1 --port 18111 -ngl 999 -fa on "
        "-c 32768 -np 1 --jinja --no-webui --log-disable"
    )
    bench = [line for line in lines if " bench bfcl " in line and "multi_turn" not in line]
    assert len(bench) == 2
    assert bench[0].endswith(
        "bench bfcl --backend openai --dialect llama-server --base-url http://127.0.0.1:18111/v1 "
        "--models qwen2.5-coder-0.5b-instruct --quant-label Q4_K_M --parse-modes client,server "
        "--categories simple_python,multiple,parallel,irrelevance --limit 200 --run-dir runs/g --no-progress"
    )
    assert lines[-1].endswith("report runs/g")


def test_the_agent_rungs_also_run_multi_turn_and_the_suite_with_every_cut() -> None:
    """On the agent rungs (Q4_K_M and Q2_K by default), against the same server: BFCL's four multi-turn categories
    at 200 cases and the suite at three seeds, each with every cut, into their own run folders."""
    env = {"DRY_RUN": "1", "MODELS": "qwen2.5-coder-1.5b-instruct", "QUANTS": "Q4_K_M Q3_K_M Q2_K", "PORT": "18111"}
    lines = [line for line in _run(env, "runs/g").stdout.splitlines() if line.startswith("+ ")]
    served = (
        "--backend openai --dialect llama-server --base-url http://127.0.0.1:18111/v1 "
        "--models qwen2.5-coder-1.5b-instruct --quant-label "
    )
    cuts = "--cuts full,no-repair,strict-parsing,bare-feedback,no-repeat-guard,answer-tool"
    agent = [line[line.index(" bench ") + 1 :] for line in lines if "multi_turn" in line or " bench suite " in line]
    assert agent == [
        f"bench bfcl {served}Q4_K_M --categories multi_turn_base,multi_turn_miss_param,multi_turn_miss_func,"
        f"multi_turn_long_context --limit 200 {cuts} --run-dir runs/g/agent",
        f"bench suite {served}Q4_K_M {cuts} --seeds 0,1,2 --temperature 0.7 --run-dir runs/g/suite",
        f"bench bfcl {served}Q2_K --categories multi_turn_base,multi_turn_miss_param,multi_turn_miss_func,"
        f"multi_turn_long_context --limit 200 {cuts} --run-dir runs/g/agent",
        f"bench suite {served}Q2_K {cuts} --seeds 0,1,2 --temperature 0.7 --run-dir runs/g/suite",
    ]
    none = [line for line in _run({**env, "AGENT_QUANTS": ""}).stdout.splitlines() if " bench suite " in line]
    assert none == []


def test_default_plan_covers_the_ladder_for_both_models() -> None:
    """Without QUANTS/MODELS the plan runs 15 rungs for each of the two Qwen2.5-Coder models."""
    proc = _run({"DRY_RUN": "1"})
    assert proc.returncode == 0, proc.stderr
    pulls = [line.split(" models pull ")[1] for line in proc.stdout.splitlines() if " models pull " in line]
    assert len(pulls) == 30
    assert pulls[0] == "qwen2.5-coder-0.5b-instruct@Q4_K_M" and pulls[-1] == "qwen2.5-coder-1.5b-instruct@IQ2_M"


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has an NVIDIA GPU")
def test_without_a_gpu_it_refuses_with_the_dry_run_hint() -> None:
    """On a machine without nvidia-smi the script exits 2 and says how to see the plan."""
    proc = _run({"DRY_RUN": "0"})
    assert proc.returncode == 2
    assert proc.stderr == "error: no NVIDIA GPU here (nvidia-smi not found); run with DRY_RUN=1 to see the plan\n"


def test_bad_limit_is_refused() -> None:
    """A LIMIT that is not a positive number is refused before anything runs."""
    proc = _run({"DRY_RUN": "1", "LIMIT": "lots"})
    assert (proc.returncode, proc.stderr) == (2, "error: LIMIT must be a positive number of cases, got 'lots'\n")
    assert proc.stdout == ""
    proc = _run({"DRY_RUN": "1", "AGENT_LIMIT": "0"})
    assert (proc.returncode, proc.stderr) == (2, "error: AGENT_LIMIT must be a positive number of cases, got '0'\n")
    assert proc.stdout == ""
