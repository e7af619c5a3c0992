"""The Vulkan llama-server of ``scripts/fetch-llama-server-vulkan.sh``, launched from the ``strix-halo-vulkan`` profile.

These tests run only with ``make test-vulkan`` (marker ``vulkan``). They need the binary and a Vulkan device; on
a machine without a GPU, Mesa's lavapipe is one (Debian: ``apt-get install mesa-vulkan-drivers``). Without either
every test skips with the command that fixes it. The device is chosen by the environment, never by the command:
ggml leaves CPU-type devices such as lavapipe out unless ``GGML_VK_VISIBLE_DEVICES`` names them, so it is set to
``0`` here when the caller has not set it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tooldispatch.profiles import load_profile, plan_launch, start_server, stop_server, wait_until_ready


def vulkan_bin() -> Path:
    """The folder holding the Vulkan ``llama-server`` (``LLAMA_SERVER_VULKAN_HOME`` overrides its root)."""
    default = Path.home() / ".cache" / "tooldispatch" / "llama-server-vulkan"
    return Path(os.environ.get("LLAMA_SERVER_VULKAN_HOME", default)) / "bin"


@pytest.fixture(scope="session")
def vulkan_env() -> Iterator[dict[str, str]]:
    """PATH with the Vulkan build first, the device named, and llama.cpp's load log on; skips without a device."""
    server = vulkan_bin() / "llama-server"
    if not server.is_file():
        pytest.skip(
            f"no Vulkan llama-server at {server}: build one with scripts/build-llama-server.sh --vulkan, "
            "or fetch one with scripts/fetch-llama-server-vulkan.sh"
        )
    env = {
        "PATH": f"{vulkan_bin()}{os.pathsep}{os.environ.get('PATH', '')}",
        "GGML_VK_VISIBLE_DEVICES": os.environ.get("GGML_VK_VISIBLE_DEVICES", "0"),
        "LLAMA_ARG_LOG_VERBOSITY": "4",
    }
    listed = subprocess.run(
        [str(server), "--list-devices"], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )
    if "Vulkan0" not in listed.stdout + listed.stderr:
        pytest.skip(
            "llama-server sees no Vulkan device: install a GPU driver's Vulkan ICD, or Mesa's lavapipe "
            "(apt-get install mesa-vulkan-drivers)"
        )
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        yield env


@dataclass(frozen=True, slots=True)
class VulkanServer:
    """A Vulkan llama-server the profile launched.

    Attributes:
        base_url: its OpenAI API root.
        port: the port it listens on.
        log: its log file.
    """

    base_url: str
    port: int
    log: Path


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_profile(model_path: Path, log: Path) -> Iterator[VulkanServer]:
    """Launch ``strix-halo-vulkan`` on ``model_path`` as ``tooldispatch serve`` does; stop it afterwards."""
    plan = plan_launch(load_profile("strix-halo-vulkan"), model_path=str(model_path), port=free_port())
    process = start_server(plan, log_path=log)
    try:
        wait_until_ready(plan, process, log_path=log, timeout_s=600)
        yield VulkanServer(base_url=plan.base_url, port=plan.port, log=log)
    finally:
        stop_server(process)


@pytest.fixture(scope="module")
def smollm2_vulkan(
    vulkan_env: dict[str, str], smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VulkanServer]:
    """The profile serving SmolLM2-135M on the Vulkan device."""
    yield from serve_profile(smollm2_path, tmp_path_factory.mktemp("vulkan") / "smollm2.log")


@pytest.fixture(scope="module")
def qwen_vulkan(
    vulkan_env: dict[str, str], qwen_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VulkanServer]:
    """The profile serving the packaged Qwen2.5-Coder-0.5B on the Vulkan device."""
    yield from serve_profile(qwen_path, tmp_path_factory.mktemp("vulkan") / "qwen.log")
