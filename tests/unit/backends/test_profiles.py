"""Deployment profiles: every shipped profile loads, launch commands are exact, typos are errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.cli import app
from tooldispatch.errors import ConfigError
from tooldispatch.profiles import backend_from_profile, list_profiles, load_profile, plan_launch
from tooldispatch.profiles.launch import fill
from tooldispatch.prompting import get_format
from tooldispatch.toolspec import ToolSpec

VLLM_ARGS = [
    "vllm", "serve", "nvidia/Qwen3-30B-A3B-NVFP4",
    "--quantization", "modelopt_fp4", "--kv-cache-dtype", "fp8", "--gpu-memory-utilization", "0.85",
    "--max-model-len", "32768", "--enable-auto-tool-choice", "--enable-prefix-caching", "--tool-call-parser", "hermes",
    "--reasoning-parser", "qwen3",
]  # fmt: skip
LLAMA_SERVER_ARGS = [
    "llama-server", "-m", "/srv/models/qwen3-30b-a3b/Qwen3-30B-A3B-Q4_K_M.gguf",
    "-ngl", "999", "-fa", "on", "--load-mode", "none", "--jinja",
    "-np", "4", "--kv-unified", "--cache-reuse", "256", "-c", "32768",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model cache at /srv/models, the folder the profiles' ``{models}`` placeholder names."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", "/srv/models")


def write_profile(tmp_path: Path, text: str) -> Path:
    """Write a profile file and return its path."""
    path = tmp_path / "custom.toml"
    path.write_text(text)
    return path


def test_every_shipped_profile_loads() -> None:
    """The shipped profiles are exactly these seven, and each one parses."""
    names = list_profiles()
    assert names == [
        "cpu-llamacpp",
        "cpu-vllm",
        "dgx-spark-vllm-nvfp4",
        "local-llama-cpp-python",
        "openrouter",
        "strix-halo-rocm",
        "strix-halo-vulkan",
    ]
    backends = {name: load_profile(name).backend for name in names}
    assert backends == {
        "cpu-llamacpp": "llamacpp",
        "cpu-vllm": "openai_compat",
        "dgx-spark-vllm-nvfp4": "openai_compat",
        "local-llama-cpp-python": "openai_compat",
        "openrouter": "openai_compat",
        "strix-halo-rocm": "openai_compat",
        "strix-halo-vulkan": "openai_compat",
    }


def test_dgx_spark_vllm_command_is_exact() -> None:
    """The Spark profile runs vllm serve with the NVFP4 flags, tool and reasoning parsers, host and port."""
    plan = plan_launch(load_profile("dgx-spark-vllm-nvfp4"))
    assert list(plan.argv) == [*VLLM_ARGS, "--host", "127.0.0.1", "--port", "8000"]
    assert plan.base_url == "http://127.0.0.1:8000/v1"


def test_dgx_spark_container_command_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NGC container form publishes the port on the host address and serves on 0.0.0.0:8000 inside."""
    monkeypatch.setenv("HOME", "/home/spark")
    plan = plan_launch(load_profile("dgx-spark-vllm-nvfp4"), launcher="container", port=8100)
    assert plan.command_line == (
        "docker run --rm --gpus all --ipc=host -p 127.0.0.1:8100:8000 "
        "-v /home/spark/.cache/huggingface:/root/.cache/huggingface -e HF_TOKEN nvcr.io/nvidia/vllm:26.05-py3 "
        + " ".join(VLLM_ARGS)
        + " --host 0.0.0.0 --port 8000"
    )
    assert plan.base_url == "http://127.0.0.1:8100/v1"
    assert plan.requires == "docker"


@pytest.mark.parametrize(
    ("name", "env"), [("strix-halo-vulkan", "AMD_VULKAN_ICD=RADV"), ("strix-halo-rocm", "ROCBLAS_USE_HIPBLASLT=1")]
)
def test_strix_halo_llama_server_command_is_exact(name: str, env: str) -> None:
    """Strix Halo profiles run llama-server with -ngl 999 -fa on --load-mode none --jinja and an explicit port."""
    plan = plan_launch(load_profile(name), port=9001)
    assert plan.command_line == f"{env} " + " ".join(LLAMA_SERVER_ARGS) + " --host 127.0.0.1 --port 9001"
    assert plan.base_url == "http://127.0.0.1:9001/v1"


def test_local_llama_cpp_python_command_is_exact() -> None:
    """The llama-cpp-python profile runs this interpreter's server module on loopback."""
    plan = plan_launch(load_profile("local-llama-cpp-python"), model_path="/m/smollm2.gguf", port=18000)
    assert list(plan.argv) == [
        sys.executable, "-m", "llama_cpp.server", "--model", "/m/smollm2.gguf",
        "--host", "127.0.0.1", "--port", "18000", "--n_ctx", "2048",
    ]  # fmt: skip


def test_serve_dry_run_prints_the_command() -> None:
    """``tooldispatch serve --dry-run`` prints exactly the planned command line."""
    result = CliRunner().invoke(app, ["serve", "--profile", "strix-halo-vulkan", "--dry-run", "--port", "8181"])
    assert result.exit_code == 0
    assert result.output == "AMD_VULKAN_ICD=RADV " + " ".join(LLAMA_SERVER_ARGS) + " --host 127.0.0.1 --port 8181\n"


def test_serve_refuses_profiles_without_a_server() -> None:
    """In-process and remote profiles have nothing to launch; the error says how to use them instead."""
    with pytest.raises(ConfigError) as info:
        plan_launch(load_profile("cpu-llamacpp"))
    assert str(info.value) == (
        "profile 'cpu-llamacpp' runs the model in-process; there is no server to start. "
        'Run it directly: tooldispatch run "..." --profile cpu-llamacpp'
    )
    with pytest.raises(ConfigError) as remote:
        plan_launch(load_profile("openrouter"))
    assert str(remote.value) == (
        "profile 'openrouter' talks to a remote API; there is no server to start. "
        'Use it directly: tooldispatch run "..." --profile openrouter'
    )


def test_unknown_launcher_lists_the_known_ones() -> None:
    """Asking for a launcher the profile lacks names the ones it has."""
    with pytest.raises(ConfigError) as info:
        plan_launch(load_profile("strix-halo-rocm"), launcher="docker")
    assert str(info.value) == "profile 'strix-halo-rocm' has no launcher 'docker'; choose one of default, toolbox"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('backend = "openai_compat"\nmodle = "x"\n', "unknown key 'modle'; allowed keys: "),
        ('backend = "llamacpp"\n[llamacpp]\nn_cxt = 1\n', "unknown key [llamacpp] 'n_cxt'; allowed keys: "),
        (
            'backend = "openai_compat"\n[client]\nbase_url = "u"\nserved_model = "m"\ndialect = "openrouter"\n'
            "[client.provider]\nquantisations = []\n",
            "unknown key [client.provider] 'quantisations'; allowed keys: ",
        ),
        ('backend = "llamacpp"\n[server]\ncommand = ["x"]\nprot = 1\n', "unknown key [server] 'prot'; allowed keys: "),
        ('backend = "openai_compat"\nclient = "http://localhost:8000/v1"\n', "'client' must be a table, got 'http://"),
        ('backend = "llamacpp"\nserver = ["llama-server"]\n', "'server' must be a table, got ['llama-server']"),
        ('backend = "llamacpp"\n[[server]]\ncommand = ["x"]\n', "'server' must be a table, got [{'command': ['x']}]"),
    ],
)
def test_a_mistake_anywhere_names_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    """A typo, or a section written as a value or an array of tables, is a ConfigError naming file and key."""
    path = write_profile(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_profile(path)
    assert str(info.value).startswith(f"{path}: {message}")


def test_missing_profile_lists_the_known_ones() -> None:
    """An unknown profile name is an error listing the shipped profiles."""
    with pytest.raises(ConfigError, match=r"known profiles: cpu-llamacpp, cpu-vllm, dgx-spark-vllm-nvfp4, local-llama"):
        load_profile("dgx-sprak")


def test_placeholders_leave_other_braces_alone() -> None:
    """Only the known placeholders are filled; JSON arguments keep their braces."""
    assert fill('--x {port} {"a": {host}} {other}', {"port": "1", "host": "h"}) == '--x 1 {"a": h} {other}'


def test_openrouter_backend_carries_the_pinned_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenRouter profile builds a backend with its provider route and key variable."""
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-fake")
    backend = backend_from_profile("openrouter")
    assert isinstance(backend, OpenAICompatBackend)
    assert (backend.base_url, backend.model, backend.dialect, backend.parse) == (
        "https://openrouter.ai/api/v1",
        "qwen/qwen3-32b",
        "openrouter",
        "server",
    )
    assert backend.provider == {
        "only": ["deepinfra"],
        "quantizations": ["fp8"],
        "allow_fallbacks": False,
        "require_parameters": True,
    }
    assert backend.api_key_env == "OPENROUTER_API_KEY"


def test_backend_overrides_port_and_parse_mode() -> None:
    """Overrides point the backend at another port and switch the parse mode."""
    backend = backend_from_profile("strix-halo-vulkan", port=9001, parse="client")
    assert isinstance(backend, OpenAICompatBackend)
    assert (backend.base_url, backend.parse) == ("http://127.0.0.1:9001/v1", "client")


def test_client_mode_uses_the_model_family_tool_format() -> None:
    """In client parse mode the tools are described in the format the model's manifest names."""
    backend = backend_from_profile("local-llama-cpp-python")
    assert isinstance(backend, OpenAICompatBackend)
    tool = ToolSpec(name="ping", parameters={"type": "object", "properties": {}})
    kwargs, _ = backend.request_body(
        ChatRequest(messages=[{"role": "user", "content": "hi"}], tools=(tool,)), stream=True
    )
    assert kwargs["messages"][0] == {"role": "system", "content": get_format("hermes_list").system([tool])}


def test_a_users_profile_wins_by_name_and_is_listed_as_theirs(cli: Any, tmp_path: Path) -> None:
    """A profile in ~/.config/tooldispatch/profiles replaces the shipped one of its name; `profiles` says which."""
    from tooldispatch.home import user_profiles_dir
    from tooldispatch.packaged import shipped_origin

    user_profiles_dir().mkdir(parents=True)
    mine = user_profiles_dir() / "openrouter.toml"
    mine.write_text('description = "my router"\nbackend = "llamacpp"\nmodel = "smollm2-135m-instruct@Q4_1"\n')
    (user_profiles_dir() / "laptop.toml").write_text('description = "my laptop"\nbackend = "llamacpp"\n')
    assert load_profile("openrouter").path == mine
    assert load_profile("openrouter").description == "my router"
    listed = cli("profiles", "--json")
    assert listed.code == 0
    rows = {row["profile"]: (row["from"], row["description"]) for row in json.loads(listed.out)}
    assert rows["openrouter"] == ("user", "my router")
    assert rows["laptop"] == ("user", "my laptop")
    assert rows["dgx-spark-vllm-nvfp4"][0] == shipped_origin()
    assert len(rows) == 8


def test_the_configs_dir_variable_replaces_the_shipped_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TOOLDISPATCH_CONFIGS_DIR names the folder used instead of the shipped profiles; its files say `env`."""
    from tooldispatch.profiles import profile_entries

    (tmp_path / "only.toml").write_text('description = "only"\nbackend = "llamacpp"\n')
    monkeypatch.setenv("TOOLDISPATCH_CONFIGS_DIR", str(tmp_path))
    assert {name: e.origin for name, e in profile_entries().items()} == {"only": "env"}
    with pytest.raises(ConfigError, match=r"^no profile 'cpu-llamacpp' in .*; known profiles: only$"):
        load_profile("cpu-llamacpp")


def test_the_models_placeholder_is_the_model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """``{models}`` in a profile is the model cache folder of tooldispatch.home.models_dir."""
    assert fill("{models}/x.gguf", {"models": "/srv/models"}) == "/srv/models/x.gguf"
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", "/elsewhere/m")
    plan = plan_launch(load_profile("strix-halo-vulkan"))
    assert plan.argv[2] == "/elsewhere/m/qwen3-30b-a3b/Qwen3-30B-A3B-Q4_K_M.gguf"
