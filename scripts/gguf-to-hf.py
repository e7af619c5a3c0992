"""Convert a GGUF model into a bf16 Hugging Face folder that vLLM on the CPU can load.

Run by ``scripts/vllm-cpu.sh convert`` with the vLLM virtualenv's interpreter (it needs ``torch``,
``transformers``, ``gguf`` and ``accelerate``, which the project's own environment does not carry)::

    python scripts/gguf-to-hf.py MODEL.gguf OUT_DIR

``transformers`` dequantizes the GGUF's tensors while loading (``from_pretrained(..., gguf_file=...)``); the
model then still carries the GGUF quantization marker, which ``save_pretrained`` would write into
``config.json`` and vLLM would read as a quantization it cannot load, so the marker is dropped first. The
weights are written in bf16 (the quantization's rounding stays in them: this is the Q4_K_M model, stored wide).
The tokenizer, with the chat template from the GGUF's metadata, is saved beside the weights. The folder is
written under a temporary name and renamed at the end, so an interrupted run never leaves a half folder;
``tooldispatch-source.json`` records where it came from.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path


def sha256(path: Path) -> str:
    """The file's sha256, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert(gguf: Path, out: Path) -> None:
    """Write the bf16 Hugging Face folder for ``gguf`` at ``out`` (replacing nothing: ``out`` must not exist)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, torch_dtype=torch.bfloat16)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.torch_dtype = torch.bfloat16
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    if not getattr(tokenizer, "chat_template", None):
        raise SystemExit(f"error: {gguf} carries no chat template; vLLM could not render tool requests")
    source = {
        "gguf": str(gguf),
        "gguf_sha256": sha256(gguf),
        "dtype": "bfloat16",
        "note": f"dequantized from {gguf.name}: the quantized model's weights, stored in bf16",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }
    (tmp / "tooldispatch-source.json").write_text(json.dumps(source, indent=2) + "\n")
    tmp.rename(out)


def main(argv: list[str]) -> int:
    """``gguf-to-hf.py MODEL.gguf OUT_DIR``."""
    if len(argv) != 2:
        print("usage: gguf-to-hf.py MODEL.gguf OUT_DIR", file=sys.stderr)
        return 2
    gguf, out = Path(argv[0]), Path(argv[1])
    if not gguf.is_file():
        print(f"error: no GGUF file at {gguf}; get it with `tooldispatch models pull NAME@QUANT`", file=sys.stderr)
        return 2
    if out.exists():
        print(f"error: {out} exists; remove it to convert again", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    convert(gguf, out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
