"""Deriving quantizations with llama.cpp and reading back what the file really holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.models import info, quantize, resolve

pytestmark = pytest.mark.integration


def test_pulled_file_is_what_the_manifest_says(smollm2_path: Path) -> None:
    """The pulled Q4_1 file declares Q4_1 and holds 210 Q4_1, 61 F32 and one Q8_0 tensor."""
    report = info(smollm2_path)
    assert report.declared_type == "Q4_1"
    assert dict(report.tensor_types) == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    assert report.provenance["source"] == "pypi"


def test_quantize_to_q8_0(smollm2_path: Path) -> None:
    """Requantizing Q4_1 to Q8_0 gives a file whose 211 weight matrices are Q8_0, labelled requantized."""
    path = quantize("smollm2-135m-instruct@Q8_0", nthread=2, progress=False)
    assert path == resolve("smollm2-135m-instruct@Q8_0")
    report = info(path)
    assert report.declared_type == "Q8_0"
    assert dict(report.tensor_types) == {"Q8_0": 211, "F32": 61}
    assert (report.provenance["requantized"], report.provenance["derived_from"]) == (
        True,
        "smollm2-135m-instruct@Q4_1",
    )
