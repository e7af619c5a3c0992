"""Matrix targets: pinned OpenRouter routes, remote servers, safe tool names (no request is sent)."""

from __future__ import annotations

import pytest

from tooldispatch.bench.bfcl_data import BfclCase, safe_tool_names
from tooldispatch.bench.targets import MatrixSpec, build_targets, openrouter_provider
from tooldispatch.errors import ConfigError


def test_openrouter_gets_one_pinned_cell_per_quantization_and_parse_mode() -> None:
    """fp8,fp4 × client,server gives four cells, each with its own pinned route."""
    spec = MatrixSpec(
        backend="openrouter",
        models=["qwen/qwen3-32b"],
        parse_modes=["client", "server"],
        provider_quantizations=["fp8", "fp4"],
        provider_only=["deepinfra"],
    )
    targets = build_targets(spec)
    assert [t.cell.key for t in targets] == [
        "openrouter|qwen/qwen3-32b@fp8|client|free",
        "openrouter|qwen/qwen3-32b@fp8|server|free",
        "openrouter|qwen/qwen3-32b@fp4|client|free",
        "openrouter|qwen/qwen3-32b@fp4|server|free",
    ]
    assert [t.safe_names for t in targets] == [False, True, False, True]
    assert openrouter_provider("fp4", ["deepinfra"]) == {
        "quantizations": ["fp4"],
        "allow_fallbacks": False,
        "require_parameters": True,
        "only": ["deepinfra"],
    }


def test_constrained_modes_are_checked_and_refused_on_http_backends() -> None:
    """An unknown --constrained mode and constrained decoding on a served model are configuration errors."""
    with pytest.raises(ConfigError, match="unknown constrained mode 'maybe'"):
        build_targets(MatrixSpec(backend="llamacpp", models=["smollm2-135m-instruct@Q4_1"], constrained=["maybe"]))
    with pytest.raises(ConfigError, match="only measured on the llamacpp backend"):
        build_targets(MatrixSpec(backend="openai", models=["m"], base_url="http://x/v1", constrained=["required"]))


def test_openai_backend_needs_a_base_url_and_one_model() -> None:
    """--backend openai without --base-url, or with two models, is a configuration error naming the fix."""
    with pytest.raises(ConfigError, match="--base-url"):
        build_targets(MatrixSpec(backend="openai", models=["m"]))
    with pytest.raises(ConfigError, match="one served model"):
        build_targets(MatrixSpec(backend="openai", models=["a", "b"], base_url="http://x/v1"))
    [target] = build_targets(
        MatrixSpec(backend="openai", models=["nvfp4-model"], base_url="http://spark:8000/v1", quant_label="nvfp4")
    )
    assert target.cell.key == "openai|nvfp4-model@nvfp4|client|free"


def test_server_parse_mode_and_unknown_backends_are_refused() -> None:
    """llama.cpp has no server parse mode; unknown backends are named in the error."""
    with pytest.raises(ConfigError, match="no server parse mode"):
        build_targets(MatrixSpec(backend="llamacpp", models=["smollm2-135m-instruct@Q4_1"], parse_modes=["server"]))
    with pytest.raises(ConfigError, match="unknown backend 'tgi'"):
        build_targets(MatrixSpec(backend="tgi", models=["m"]))


def test_safe_tool_names_map_back_to_bfcl_names() -> None:
    """Dots become underscores for APIs that require [a-zA-Z0-9_-]; the map leads back to BFCL's names."""
    case = BfclCase(
        id="x",
        category="simple_python",
        messages=(),
        functions=({"name": "math.factorial", "parameters": {"type": "dict", "properties": {}}},),
    )
    tools, mapping = safe_tool_names(case.tools())
    assert [t.name for t in tools] == ["math_factorial"]
    assert mapping == {"math_factorial": "math.factorial"}
