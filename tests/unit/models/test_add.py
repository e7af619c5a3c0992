"""``models add``: a user's own GGUF becomes NAME@QUANT, with the tool format read from its template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli.models import models_app
from tooldispatch.errors import ConfigError, ModelNotFoundError
from tooldispatch.home import user_models_dir
from tooldispatch.models import add_model, parse_spec, pick_tool_format, resolve
from tooldispatch.models.gguf import write_gguf

QWEN_TEMPLATE = (Path(__file__).parents[2] / "fixtures" / "templates" / "qwen2.5-coder.jinja").read_text(
    encoding="utf-8"
)
CHATML = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
LLAMA31 = '{% if tools %}{{ tools | tojson }} Respond with {"name": function name, "parameters": ...}{% endif %}'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache (the added manifests go to the user's manifest folder, empty in each test)."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _gguf(path: Path, template: str | None, arch: str = "qwen2", name: str = "My Coder 0.5B") -> Path:
    meta: dict[str, object] = {"general.architecture": arch, "general.name": name, "general.file_type": 15}
    meta[f"{arch}.context_length"] = 32768
    if template is not None:
        meta["tokenizer.chat_template"] = template
    write_gguf(path, meta, [("token_embd.weight", (256, 4), 12), ("output_norm.weight", (256,), 0)])
    return path


def test_tool_format_follows_the_template() -> None:
    """<tool_call> in a tools-rendering template is hermes; {"parameters"} JSON is json; no tools: the family's."""
    assert pick_tool_format(QWEN_TEMPLATE, "qwen2").tool_format == "hermes"
    assert pick_tool_format(QWEN_TEMPLATE, "qwen2").tool_results == "tool_role"
    assert pick_tool_format(LLAMA31, "llama").tool_format == "json"
    plain = pick_tool_format(CHATML, "llama")
    assert (plain.tool_format, plain.tool_results) == ("json", "user_turn")
    assert plain.reason == "the template renders no tools: the prompt format of family 'llama'"
    assert pick_tool_format(CHATML, "phi3").tool_format == "hermes"


def test_add_writes_a_manifest_that_resolves(cache: Path, tmp_path: Path) -> None:
    """The added file is NAME@QUANT (its declared type), resolves to itself, and lists the ladder as derived."""
    path = _gguf(tmp_path / "mine.gguf", QWEN_TEMPLATE)
    manifest, choice = add_model(path, progress=False)
    assert (manifest.id, manifest.family, manifest.context_length) == ("my-coder-0.5b", "qwen2", 32768)
    assert (manifest.tool_format, manifest.tool_results, choice.tool_format) == ("hermes", "tool_role", "hermes")
    assert manifest.path == user_models_dir() / "my-coder-0.5b.toml"
    assert resolve("my-coder-0.5b@Q4_K_M") == path.resolve()
    spec = parse_spec("my-coder-0.5b@Q2_K")
    assert (spec.quant.source, spec.quant.derived_from) == ("derived", "Q4_K_M")
    assert spec.path == cache / "my-coder-0.5b" / "Q2_K.gguf"
    assert not (tmp_path / "mine.gguf.json").exists()  # nothing is written beside the user's file


def test_added_file_that_changed_is_corrupt(cache: Path, tmp_path: Path) -> None:
    """A file changed after ``add`` no longer resolves; the error names the command that re-adds it."""
    path = _gguf(tmp_path / "mine.gguf", QWEN_TEMPLATE)
    add_model(path, model_id="mine", progress=False)
    with path.open("r+b") as fh:
        fh.seek(-1, 2)
        fh.write(b"\x01")
    with pytest.raises(ModelNotFoundError, match=r"is corrupt .* tooldispatch models add .* --id mine --force"):
        resolve("mine@Q4_K_M")


def test_add_refuses_taken_ids_and_files_without_template(cache: Path, tmp_path: Path) -> None:
    """A shipped id, a second add without --force, and a template-less file are refused with what to do."""
    path = _gguf(tmp_path / "mine.gguf", QWEN_TEMPLATE)
    with pytest.raises(ConfigError, match=r"'smollm2-135m-instruct' is a shipped model's id; pass another"):
        add_model(path, model_id="smollm2-135m-instruct", progress=False)
    add_model(path, model_id="mine", progress=False)
    with pytest.raises(ConfigError, match=r"already added .* pass --force"):
        add_model(path, model_id="mine", progress=False)
    assert add_model(path, model_id="mine", force=True, progress=False)[0].id == "mine"
    bare = _gguf(tmp_path / "bare.gguf", None, arch="phi3")
    with pytest.raises(ConfigError, match=r"carries no chat template .* architecture 'phi3'"):
        add_model(bare, progress=False)


def test_cli_add_then_list(cache: Path, tmp_path: Path) -> None:
    """``models add FILE --id NAME`` prints NAME@QUANT; ``models list`` then shows it as cached."""
    path = _gguf(tmp_path / "mine.gguf", CHATML, arch="llama")
    runner = CliRunner()
    result = runner.invoke(models_app, ["add", str(path), "--id", "mine"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "mine@Q4_K_M\n"
    assert "tool format json (the template renders no tools" in result.stderr
    rows = json.loads(runner.invoke(models_app, ["list", "--json"]).stdout)
    mine = [r for r in rows if r["model"] == "mine"]
    assert (mine[0]["quant"], mine[0]["source"], mine[0]["state"]) == ("Q4_K_M", "local", "cached")
    assert len(mine) == 26
