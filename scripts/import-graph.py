#!/usr/bin/env python3
"""Print the map of the package: its rooms, the arrows between them, import circles, long modules.

A room is a subpackage of ``src/tooldispatch`` or one of its top-level modules; an arrow is a distinct
room-to-room import; an import circle is a set of modules that import each other, directly or through
others (every import statement counts, deferred ones inside functions too: a circle that a deferred
import hides still ties the modules together). Reads the sources with ``ast``; imports nothing it maps.

Usage: ``python scripts/import-graph.py [--root src/tooldispatch] [--max-lines 800]``. The exit status is 1
when there is an import circle or a module over ``--max-lines``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "tooldispatch"
DEFAULT_ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE


@dataclass(frozen=True)
class House:
    """The import graph of a package.

    Attributes:
        modules: every module by dotted name, with its file.
        imports: for each module, the package modules it imports.
        lines: each module's line count.
    """

    modules: Mapping[str, Path]
    imports: Mapping[str, frozenset[str]]
    lines: Mapping[str, int]

    def room(self, module: str) -> str:
        """The room of a module: its first-level subpackage, or the top-level module itself."""
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "__init__"

    @property
    def rooms(self) -> list[str]:
        """Every room, sorted."""
        return sorted({self.room(m) for m in self.modules})

    @property
    def arrows(self) -> list[tuple[str, str]]:
        """Distinct room-to-room imports, sorted."""
        found = {
            (self.room(source), self.room(target))
            for source, targets in self.imports.items()
            for target in targets
            if self.room(source) != self.room(target)
        }
        return sorted(found)

    @property
    def circles(self) -> list[list[str]]:
        """Sets of modules that import one another (strongly connected components of two or more), sorted."""
        return sorted(sorted(c) for c in _components(self.imports) if len(c) > 1)

    def long_modules(self, limit: int) -> list[tuple[str, int]]:
        """Modules over ``limit`` lines, longest first."""
        return sorted(((m, n) for m, n in self.lines.items() if n > limit), key=lambda item: (-item[1], item[0]))


def module_name(path: Path, root: Path) -> str:
    """The dotted name of a file under the package root (``__init__.py`` names its package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def _imported(node: ast.AST, module: str, is_package: bool, known: Mapping[str, Path]) -> Iterable[str]:
    """The dotted names an import statement imports.

    ``from pkg import mod`` imports the submodule ``pkg.mod``; the package itself counts only when a name
    imported from it is not a submodule.
    """
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            origin = ".".join([*base, node.module] if node.module else base)
        else:
            origin = node.module or ""
        for alias in node.names:
            yield f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin


def read_house(root: Path = DEFAULT_ROOT) -> House:
    """Read every module under ``root`` and resolve the package imports of each."""
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    imports: dict[str, frozenset[str]] = {}
    lines: dict[str, int] = {}
    for module, path in files.items():
        text = path.read_text(encoding="utf-8")
        lines[module] = len(text.splitlines())
        targets: set[str] = set()
        for node in ast.walk(ast.parse(text, filename=str(path))):
            for name in _imported(node, module, path.name == "__init__.py", files):
                # The longest known module the name starts with: ``pkg.mod.func`` is ``pkg.mod``.
                parts = name.split(".")
                while parts and ".".join(parts) not in files:
                    parts.pop()
                if parts:
                    targets.add(".".join(parts))
        targets.discard(module)
        imports[module] = frozenset(targets)
    return House(modules=files, imports=imports, lines=lines)


def _components(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan's algorithm, written without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the house; exit 1 when it has an import circle or a module over the line limit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the package directory to map")
    parser.add_argument("--max-lines", type=int, default=800, help="the most lines a module should have")
    parser.add_argument("--arrows", action="store_true", help="list every arrow, not only the count")
    args = parser.parse_args(argv)
    house = read_house(args.root)
    rooms, arrows, circles = house.rooms, house.arrows, house.circles
    long = house.long_modules(args.max_lines)
    print(f"rooms: {len(rooms)} ({', '.join(rooms)})")
    print(f"arrows: {len(arrows)}")
    if args.arrows:
        for source, target in arrows:
            print(f"  {source} -> {target}")
    print(f"import circles: {len(circles)}")
    for circle in circles:
        print("  " + " <-> ".join(str(house.modules[m].relative_to(args.root)) for m in circle))
    print(f"modules over {args.max_lines} lines: {len(long)}")
    for module, count in long:
        print(f"  {house.modules[module].relative_to(args.root)}: {count}")
    return 1 if circles or long else 0


if __name__ == "__main__":
    sys.exit(main())
