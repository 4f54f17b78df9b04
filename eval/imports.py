"""The import graph of a package, read from source (nothing is imported).

    python -m eval.imports [ROOT] [--package engine]

prints the package's modules, lines, import floors (the longest chain of internal imports
below a module, plus one), internal import edges, cycles (``TYPE_CHECKING`` and function-
level imports included) and the edges between sub-packages. ``tests/test_imports.py``
enforces the sub-package contract with the same reader.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Graph", "cycles", "floors", "part_of", "read_graph"]


@dataclass(frozen=True, slots=True)
class Graph:
    """Modules of one package (dotted names), their line counts and internal imports."""

    package: str
    lines: dict[str, int]
    edges: dict[str, set[str]]  # module -> internal modules it imports

    @property
    def edge_count(self) -> int:
        """How many internal module -> module arrows there are."""
        return sum(len(v) for v in self.edges.values())


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, str]]:
    """(imported module, imported name or "") for every import statement anywhere."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                yield target, alias.name


def read_graph(root: Path, package: str) -> Graph:
    """The internal import graph of ``root/package``."""
    files = sorted((root / package).rglob("*.py"))
    names = {_module_name(root, f): f for f in files}
    lines: dict[str, int] = {}
    edges: dict[str, set[str]] = {}
    for name, path in names.items():
        text = path.read_text("utf-8")
        lines[name] = text.count("\n")
        out: set[str] = set()
        tree = ast.parse(text, str(path))
        for target, alias in _imported(tree, name, path.name == "__init__.py"):
            sub = f"{target}.{alias}" if alias else ""
            if sub in names:  # `from engine.core import errors`: the submodule itself
                out.add(sub)
            elif target in names:
                out.add(target)
        out.discard(name)
        edges[name] = out
    return Graph(package, lines, edges)


def cycles(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def floors(edges: Mapping[str, Set[str]]) -> dict[str, int]:
    """Each module's floor: 1 + the highest floor it imports (leaves are 1); modules in a
    cycle share the floor of their component."""
    comp_of: dict[str, str] = {}
    for comp in cycles(edges):
        for m in comp:
            comp_of[m] = comp[0]
    memo: dict[str, int] = {}

    def floor(v: str, seen: frozenset[str]) -> int:
        key = comp_of.get(v, v)
        if key in memo:
            return memo[key]
        members = [m for m in edges if comp_of.get(m, m) == key]
        below = {w for m in members for w in edges.get(m, ()) if comp_of.get(w, w) != key}
        result = 1 + max((floor(w, seen | {key}) for w in below), default=0)
        memo[key] = result
        return result

    return {m: floor(m, frozenset()) for m in edges}


def part_of(module: str, package: str) -> str:
    """The sub-package (or top-level module) a module belongs to: ``engine.core.errors`` ->
    ``core``, ``engine._workspace`` -> ``_workspace``, ``engine`` -> ``engine`` (the facade)."""
    parts = module.split(".")
    return package if len(parts) == 1 else parts[1]


def main(argv: list[str] | None = None) -> int:
    """Print the graph's figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path())
    parser.add_argument("--package", default="engine")
    args = parser.parse_args(argv)
    graph = read_graph(args.root, args.package)
    depth = floors(graph.edges)
    loops = cycles(graph.edges)
    print(f"{args.package}: {len(graph.lines)} modules, {sum(graph.lines.values()):,} lines, "
          f"{max(depth.values(), default=0)} floors, {graph.edge_count} internal edges, "
          f"{len(loops)} cycles")  # fmt: skip
    for loop in loops:
        print("  cycle: " + " -> ".join(loop))
    parts: dict[tuple[str, str], int] = defaultdict(int)
    for src, targets in graph.edges.items():
        for dst in targets:
            a, b = part_of(src, args.package), part_of(dst, args.package)
            if a != b:
                parts[(a, b)] += 1
    names = {part_of(m, args.package) for m in graph.edges}
    part_edges: dict[str, set[str]] = {n: set() for n in names}
    for a, b in parts:
        part_edges[a].add(b)
    part_floors = floors(part_edges)
    print(f"parts: {len(names)}, {max(part_floors.values(), default=0)} floors, "
          f"{len(parts)} edges between parts, {len(cycles(part_edges))} cycles")  # fmt: skip
    for level in range(max(part_floors.values(), default=0), 0, -1):
        print(f"  {level}: {', '.join(sorted(p for p, d in part_floors.items() if d == level))}")
    by_part: dict[str, list[str]] = defaultdict(list)
    for (a, b), n in sorted(parts.items()):
        by_part[a].append(f"{b} ({n})")
    print("sub-package edges:")
    for a in sorted(by_part):
        print(f"  {a} -> {', '.join(by_part[a])}")
    print("modules by floor:")
    for level in range(max(depth.values(), default=0), 0, -1):
        mods = sorted(m for m, d in depth.items() if d == level)
        print(f"  {level:>2}: {', '.join(mods)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
