"""Draws docs/layers.png: cogworker's packages, in the layers of pyproject.toml's import
contract, each box listing its package's modules, with an arrow for every package that
imports another (imports inside functions included), read from the code itself. Needs
Graphviz's `dot` and `tred`:

    python3 docs/layers.py        # writes docs/layers.dot and docs/layers.png
"""

from __future__ import annotations

import ast
import subprocess
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name, and its file (tests/test_layout.py reads them too)."""
    found = {}
    for path in (ROOT / "cogworker").rglob("*.py"):
        found[".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module ``name`` imports, wherever the import statement stands (``from p import m``
    names the module ``p.m`` where there is one, else ``p``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            mod = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            out.update(f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def package_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def edges() -> dict[str, set[str]]:
    known = modules()
    out: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for target in imported(name, path, known):
            if target.startswith("cogworker."):
                a, b = package_of(name), package_of(target)
                if a != b and "__init__" not in (a, b):
                    out[a].add(b)
            elif target == "redis" or target.startswith("redis."):
                out[package_of(name)].add("redis-py")
    return out


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    top = next(c for c in config if c["id"] == "layers")
    return [[p.strip() for p in line.replace(":", "|").split("|")] for line in top["layers"]]


def members() -> dict[str, list[str]]:
    """Each package's modules by their names inside it (``fetch.fetcher``), its ``__init__`` left out."""
    out: dict[str, list[str]] = defaultdict(list)
    for name in modules():
        parts = name.split(".")
        if len(parts) > 2:
            out[parts[1]].append(".".join(parts[2:]))
    return {package: sorted(names) for package, names in out.items()}


def label(package: str, names: list[str], width: int = 34) -> str:
    """The package's name over its modules, wrapped to ``width`` characters a line (an
    HTML-like label: dot sizes the box to it)."""
    if not names:
        return f'"{package}"'
    lines: list[str] = []
    for name in names:
        if lines and len(lines[-1]) + 3 + len(name) <= width:
            lines[-1] += " · " + name
        else:
            lines.append(name)
    small = "<br/>".join(lines)
    return f'<<b>{package}</b><br/><font point-size="9" color="#555555">{small}</font>>'


def dot() -> str:
    graph, inside = edges(), members()
    lines = [
        "digraph layers {",
        "  rankdir=TB; nodesep=0.35; ranksep=0.45;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", color="#4a6fa5",'
        ' fontname="Helvetica", fontsize=12];',
        '  edge [color="#8a9bb5", arrowsize=0.6];',
    ]
    for rank in [*layers(), ["redis-py"]]:
        names = " ".join(f'"{n}"' for n in rank)
        lines.append(f"  {{ rank=same; {names} }}")
    for package in sorted(inside):
        lines.append(f'  "{package}" [label={label(package, inside[package])}];')
    lines.append('  "store" [fillcolor="#fbe9d0", color="#b5762a"];')
    lines.append('  "redis-py" [shape=ellipse, fillcolor="#f6f6f6", color="#999999"];')
    for a in sorted(graph):
        for b in sorted(graph[a]):
            lines.append(f'  "{a}" -> "{b}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    source = dot()
    (DOCS / "layers.dot").write_text(source)
    # tred drops an arrow that another path already implies, so the picture stays readable
    reduced = subprocess.run(["tred"], input=source, capture_output=True, text=True, check=True).stdout
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", str(DOCS / "layers.png")], input=reduced, text=True, check=True)


if __name__ == "__main__":
    main()
