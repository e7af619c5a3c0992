#!/usr/bin/env python3
"""Record raw model outputs for the parser corpus, with everything needed to record each one again.

Each record stores, beside the output, the exact prompt text the model saw (the GGUF's own chat template
rendered with the messages and the tools), the template itself, the model file and its sha256, the sampling
settings and the seed, and the llama-cpp-python version. ``--again ID`` re-runs a stored record from those
fields alone and says whether the output is the same.

Usage (from the repository root, with the ``[llama]`` extra installed)::

    scripts/record-corpus.py record --model models-cache/smollm2.gguf --tools weather \\
        --task "What is the weather in Paris?" --seed 7 --out tests/fixtures/corpus/recorded-new.jsonl
    scripts/record-corpus.py again --corpus tests/fixtures/corpus/recorded-new.jsonl --id rec-weather-7

New records get ``expected_calls: null``: label each by hand before it joins ``recorded.jsonl``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

CORPUS = Path("tests/fixtures/corpus")
SYSTEM = "You are a helpful assistant. Use a tool when it helps; answer directly otherwise."


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], llm: Any) -> str:
    """The prompt text: the GGUF's chat template rendered in a sandbox, as llama.cpp's Jinja path does."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    bos = llm.detokenize([llm.token_bos()]).decode("utf-8", "replace") if llm.token_bos() >= 0 else ""
    eos = llm.detokenize([llm.token_eos()]).decode("utf-8", "replace") if llm.token_eos() >= 0 else ""
    return env.from_string(template).render(
        messages=messages, tools=tools, add_generation_prompt=True, bos_token=bos, eos_token=eos
    )


def _generate(recording: dict[str, Any]) -> tuple[str, str | None]:
    """Run the stored prompt with the stored settings; the output text and the finish reason."""
    from llama_cpp import Llama

    settings = recording["settings"]
    llm = Llama(model_path=recording["model_path"], n_ctx=settings["n_ctx"], seed=settings["seed"], verbose=False)
    done = llm.create_completion(
        prompt=recording["prompt"],
        max_tokens=settings["max_tokens"],
        temperature=settings["temperature"],
        top_p=settings["top_p"],
        top_k=settings["top_k"],
        seed=settings["seed"],
    )
    choice = done["choices"][0]  # type: ignore[index]
    return choice["text"], choice.get("finish_reason")


def record(args: argparse.Namespace) -> int:
    import llama_cpp

    model = Path(args.model)
    tools = json.loads((CORPUS / "tools.json").read_text(encoding="utf-8"))[args.tools]
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=args.n_ctx, seed=args.seed, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        print(f"error: {model} has no chat template in its metadata; pick a GGUF that ships one", file=sys.stderr)
        return 2
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": args.task}]
    recording = {
        "model_path": str(model),
        "model_sha256": _sha256(model),
        "llama_cpp_python": llama_cpp.__version__,
        "template": template,
        "messages": messages,
        "prompt": _render(template, messages, tools, llm),
        "settings": {
            "seed": args.seed, "temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k,
            "max_tokens": args.max_tokens, "n_ctx": args.n_ctx,
        },
    }  # fmt: skip
    del llm
    text, finish = _generate(recording)
    entry = {
        "id": args.id or f"rec-{args.tools}-{args.seed}",
        "format": "recorded",
        "tools_ref": args.tools,
        "text": text,
        "expected_calls": None,
        "finish_reason": finish,
        "source": f"{model.name} through llama-cpp-python {llama_cpp.__version__}, seed {args.seed}",
        "recording": recording,
    }
    with Path(args.out).open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    print(f"recorded {entry['id']} ({len(text)} characters) to {args.out}; label its expected_calls by hand")
    return 0


def again(args: argparse.Namespace) -> int:
    for line in Path(args.corpus).read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["id"] != args.id:
            continue
        recording = entry.get("recording")
        if recording is None:
            print(
                f"error: {args.id} was recorded without its prompt and settings; it cannot be re-run", file=sys.stderr
            )
            return 2
        if _sha256(Path(recording["model_path"])) != recording["model_sha256"]:
            print(f"error: {recording['model_path']} is not the file {args.id} was recorded with", file=sys.stderr)
            return 2
        text, _ = _generate(recording)
        same = text == entry["text"]
        print(f"{args.id}: {'same output' if same else 'different output'}")
        return 0 if same else 1
    print(f"error: no record {args.id!r} in {args.corpus}", file=sys.stderr)
    return 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record one output")
    rec.add_argument("--model", required=True, help="a GGUF file with a chat template")
    rec.add_argument("--tools", required=True, help="a key of tests/fixtures/corpus/tools.json")
    rec.add_argument("--task", required=True, help="the user message")
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--temperature", type=float, default=0.0)
    rec.add_argument("--top-p", type=float, default=1.0)
    rec.add_argument("--top-k", type=int, default=40)
    rec.add_argument("--max-tokens", type=int, default=256)
    rec.add_argument("--n-ctx", type=int, default=4096)
    rec.add_argument("--id", default=None)
    rec.add_argument("--out", default=str(CORPUS / "recorded-new.jsonl"))
    rec.set_defaults(run=record)
    again_cmd = sub.add_parser("again", help="re-run a stored record and compare")
    again_cmd.add_argument("--corpus", default=str(CORPUS / "recorded-new.jsonl"))
    again_cmd.add_argument("--id", required=True)
    again_cmd.set_defaults(run=again)
    args = parser.parse_args()
    return int(args.run(args))


if __name__ == "__main__":
    raise SystemExit(main())
