"""``models add``: a user's own GGUF joins the cache as a model, usable everywhere a ``NAME@QUANT`` is.

The file stays where it is. Its header says the architecture, the chat template and the trained context
length; the tool format follows from the template (a template that renders ``tools`` and writes
``<tool_call>`` is hermes, one whose calls are ``{"name", "parameters"}`` JSON is the Llama 3 ``json``
format, a ``tool_code`` fence is Gemma's), and a template that renders no tools falls back to the
prompt format of the architecture's family. A manifest is written into ``added_dir()`` (the user's own
manifests, ``$XDG_CONFIG_HOME/tooldispatch/models``) with the file's
sha256, its declared type as the quantization name, and every other ladder type derivable from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from tooldispatch.errors import ConfigError, ModelNotFoundError
from tooldispatch.models.gguf import GGUFError, GGUFHeader, read_header
from tooldispatch.models.manifest import (
    DERIVABLE_TYPES,
    LADDER_TYPES,
    Manifest,
    added_dir,
    manifests_dir,
    read_manifest,
)
from tooldispatch.models.store import _progress, sha256_file, write_record
from tooldispatch.prompting.formats import FORMATS
from tooldispatch.prompting.template import ChatTemplate

FAMILY_FORMATS: Mapping[str, str] = {family: name for name, fmt in FORMATS.items() for family in fmt.families}
"""The prompt format for a template that renders no tools, by ``general.architecture`` (each prompt format's
``families``); ``hermes`` otherwise (the format most open models were tuned on)."""

_ID = re.compile(r"[^a-z0-9.]+")


@dataclass(frozen=True, slots=True)
class ToolFormatChoice:
    """Which tool format a model gets, and why.

    Attributes:
        tool_format: a name from ``TOOL_FORMATS``.
        tool_results: ``tool_role`` when the template renders tools (it writes results itself), else ``user_turn``.
        reason: one line saying which rule chose it.
    """

    tool_format: str
    tool_results: str
    reason: str


def pick_tool_format(template: str | None, architecture: str | None) -> ToolFormatChoice:
    """Choose the tool format from the chat template, else from the architecture's family.

    Args:
        template: the GGUF's ``tokenizer.chat_template`` (``None`` when it has none).
        architecture: ``general.architecture``.
    """
    if template is not None and ChatTemplate(template).renders_tools:
        if "<tool_call>" in template:
            return ToolFormatChoice("hermes", "tool_role", "the template renders tools with <tool_call> blocks")
        if "tool_code" in template:
            return ToolFormatChoice("gemma_tool_code", "tool_role", "the template renders tools with tool_code fences")
        if '"parameters"' in template or "<|python_tag|>" in template:
            return ToolFormatChoice("json", "tool_role", 'the template renders tools as {"name", "parameters"} JSON')
    fmt = FAMILY_FORMATS.get(architecture or "", "hermes")
    why = "the template renders no tools" if template is not None else "the file has no chat template"
    family = f"family {architecture!r}" if architecture in FAMILY_FORMATS else "the default for unknown families"
    return ToolFormatChoice(fmt, "user_turn", f"{why}: the prompt format of {family}")


def model_id_for(header: GGUFHeader, path: Path) -> str:
    """A manifest id from ``general.name`` (else the file name): lower case, runs of other characters as ``-``."""
    name = header.metadata.get("general.name")
    base = name if isinstance(name, str) and name.strip() else path.stem
    return _ID.sub("-", base.lower()).strip("-.") or "model"


def _toml_str(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def add_model(
    path: str | Path,
    *,
    model_id: str | None = None,
    force: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> tuple[Manifest, ToolFormatChoice]:
    """Register a GGUF file as a model (the file stays where it is).

    Args:
        path: the ``.gguf`` file.
        model_id: the model's name (default: from ``general.name``).
        force: replace an earlier ``add`` of the same id.
        progress: show a progress bar while hashing.
        console: where to draw it.

    Returns:
        The written manifest and the tool-format choice.

    Raises:
        ModelNotFoundError: the file is missing, not a readable GGUF, or truncated.
        ConfigError: the id is taken (by a shipped model, or an earlier add without ``force``), or the file
            carries no chat template and its family has no built-in one.
    """
    src = Path(path).expanduser().resolve()
    if not src.is_file():
        raise ModelNotFoundError(f"no file at {src}; give the path of a .gguf file")
    try:
        header = read_header(src)
    except (GGUFError, OSError) as exc:
        raise ModelNotFoundError(f"{src} is not a usable GGUF file ({exc})") from exc
    mid = model_id or model_id_for(header, src)
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", mid):
        raise ConfigError(f"model id {mid!r} must be lower-case letters, digits, '.', '_' or '-'; pass --id NAME")
    if (manifests_dir() / f"{mid}.toml").is_file():
        raise ConfigError(f"{mid!r} is a shipped model's id; pass another with --id NAME")
    target = added_dir() / f"{mid}.toml"
    if target.is_file() and not force:
        raise ConfigError(f"a model {mid!r} was already added ({target}); pass --force to replace it or --id NAME")
    template = header.chat_template
    arch = header.architecture
    if template is None and arch != "gemma3":
        raise ConfigError(
            f"{src.name} carries no chat template (tokenizer.chat_template) and tooldispatch has no built-in one "
            f"for architecture {arch!r}; use a GGUF converted with its tokenizer's template"
        )
    choice = pick_tool_format(template, arch)
    quant = header.file_type or "F16"
    with _progress(console, progress) as bar:
        digest = sha256_file(src, bar)
    size = src.stat().st_size
    derived = [t for t in DERIVABLE_TYPES if t != quant]
    lines = [
        f"id = {_toml_str(mid)}",
        f"display_name = {_toml_str(str(header.metadata.get('general.name') or src.stem))}",
        f"family = {_toml_str(arch or 'unknown')}",
        'served = "local"',
        f"license = {_toml_str(str(header.metadata.get('general.license') or 'see the model card'))}",
        *([f"context_length = {header.context_length}"] if header.context_length else []),
        f"tool_format = {_toml_str(choice.tool_format)}",
        f"tool_results = {_toml_str(choice.tool_results)}",
        f"chat_template = {_toml_str('gguf' if template is not None else 'builtin:gemma3')}",
        f"template_notes = {_toml_str('Tool format chosen by tooldispatch models add: ' + choice.reason + '.')}",
        f"notes = {_toml_str(f'Added from {src}. Derived types are requantized from {quant}.')}",
        "",
        f"[quantizations.{quant}]",
        'source = "local"',
        f"path = {_toml_str(str(src))}",
        f'sha256 = "{digest}"',
        f"size_bytes = {size}",
    ]
    for t in derived:
        note = "" if t in LADDER_TYPES else '\nnotes = "Needs an importance matrix (llama-imatrix)."'
        lines += ["", f"[quantizations.{t}]", 'source = "derived"', f"from = {_toml_str(quant)}{note}"]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        manifest = read_manifest(tmp.rename(target))
    except ConfigError:
        target.unlink(missing_ok=True)
        raise
    from tooldispatch.models.store import parse_spec  # the manifest now exists

    spec = parse_spec(f"{mid}@{quant}")
    write_record(src, digest, record=spec.record_path, source="local", added_from=str(src))
    return manifest, choice
