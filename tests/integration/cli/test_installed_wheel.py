"""The package as users install it: a wheel built from the sources, installed into a fresh virtualenv outside the
checkout, and run from another folder with a home of its own.

The wheel built here is the pure-Python one (``pip wheel`` without ``TOOLDISPATCH_MYPYC``), which keeps the test
to well under a minute; ``make wheel`` builds the compiled one from the same sources. Dependencies come from
pip's cache or PyPI. The run goes to the scripted model on 127.0.0.1 (``upstream.py``), so the virtualenv needs
no llama-cpp-python; the model cache the test prepares holds SmolLM2, which ``models list`` and ``models pull``
must find in the per-user cache without downloading it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
from upstream import upstream

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[3]
SHIPPED = ROOT / "src" / "tooldispatch" / "data"
SMOLLM2 = "smollm2-135m-instruct@Q4_1"


def _build_wheel(base: Path) -> Path:
    """The pure-Python wheel, built from a copy of the sources (the in-place compiled modules left out)."""
    tree = base / "sources"
    tree.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    env = {k: v for k, v in os.environ.items() if k != "TOOLDISPATCH_MYPYC"}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(base / "dist"),
         str(tree)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, f"the wheel did not build (needs setuptools>=77 and wheel):\n{built.stderr[-3000:]}"
    [wheel] = (base / "dist").glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``tooldispatch`` script of a fresh virtualenv holding only the wheel and its dependencies."""
    base = tmp_path_factory.mktemp("installed")
    wheel = _build_wheel(base)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert wheel.name == f"tooldispatch-{version}-py3-none-any.whl"
    venv.create(base / "venv")  # without pip of its own: this interpreter's pip installs into it (--python)
    python = base / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--disable-pip-version-check",
         str(wheel)],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return base / "venv" / "bin" / "tooldispatch"


@pytest.fixture
def user(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with an empty home and XDG folders, nothing of the checkout's on any path."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "TOOLDISPATCH_MODELS_DIR", "TOOLDISPATCH_CONFIGS_DIR",
            "TOOLDISPATCH_MANIFESTS_DIR", "TOOLDISPATCH_STORE")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in drop}
    for name, folder in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                         ("XDG_CACHE_HOME", "cache")):  # fmt: skip
        (tmp_path / folder).mkdir()
        env[name] = str(tmp_path / folder)
    return env


def _cache_with_smollm2(env: dict[str, str]) -> Path:
    """The per-user cache of ``env`` holding SmolLM2 (a link to the suite's verified copy) and its record."""
    from tooldispatch.models import pull

    source = pull(SMOLLM2, progress=False)
    target = Path(env["XDG_CACHE_HOME"]) / "tooldispatch" / "models" / "smollm2-135m-instruct" / "Q4_1.gguf"
    target.parent.mkdir(parents=True)
    target.symlink_to(source)
    shutil.copy2(source.with_name(source.name + ".json"), target.with_name(target.name + ".json"))
    return target


def test_the_installed_wheel_works_from_any_folder(installed: Path, user: dict[str, str], tmp_path: Path) -> None:
    """From an empty folder: --version, models list (shipped manifests, the prepared cache), serve --dry-run of a
    shipped profile, parse, and run against a model all work, and nothing is written into that folder."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cached = _cache_with_smollm2(user)

    def tooldispatch(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(installed), *args], cwd=elsewhere, env=user, input=stdin, capture_output=True, text=True, timeout=120
        )

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert tooldispatch("--version").stdout == f"tooldispatch {version}\n"

    listed = tooldispatch("models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {r["model"] for r in rows} == {p.stem for p in (SHIPPED / "models").glob("*.toml")}
    assert {r["from"] for r in rows} == {"shipped"}
    states = {f"{r['model']}@{r['quant']}": r["state"] for r in rows}
    assert states[SMOLLM2] == "cached"
    pulled = tooldispatch("models", "pull", SMOLLM2)
    assert (pulled.returncode, pulled.stdout) == (0, f"{cached}\n")

    profiles = json.loads(tooldispatch("profiles", "--json").stdout)
    assert {(p["profile"], p["from"]) for p in profiles} == {
        (p.stem, "shipped") for p in (SHIPPED / "profiles").glob("*.toml")
    }
    served = tooldispatch("serve", "--profile", "dgx-spark-vllm-nvfp4", "--dry-run")
    assert (served.returncode, served.stderr) == (0, "")
    assert served.stdout == (
        "vllm serve nvidia/Qwen3-30B-A3B-NVFP4 --quantization modelopt_fp4 --kv-cache-dtype fp8 "
        "--gpu-memory-utilization 0.85 --max-model-len 32768 --enable-auto-tool-choice --enable-prefix-caching "
        "--tool-call-parser hermes "
        "--reasoning-parser qwen3 --host 127.0.0.1 --port 8000\n"
    )

    raw = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "o-101"}}\n</tool_call>'
    parsed = tooldispatch("parse", "--tools", "demo", stdin=raw)
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.splitlines()[0] == 'call 1: get_order {"order_id": "o-101"}'

    with upstream() as url:
        ran = tooldispatch("run", "look up o-101", "--profile", "local-llama-cpp-python", "--base-url", url, "--json")
    assert ran.returncode == 0, ran.stderr
    record = json.loads(ran.stdout)
    assert (record["end"], record["model"], record["profile"]) == (
        "final_answer",
        "smollm2-135m-instruct@Q4_1",
        "local-llama-cpp-python",
    )
    assert (Path(user["XDG_DATA_HOME"]) / "tooldispatch" / "state.db").is_file()

    assert sorted(elsewhere.iterdir()) == []
