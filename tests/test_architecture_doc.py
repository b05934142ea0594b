"""The design (docs/architecture.md and the Internals pages it leads to) names only what exists.

Every module path it cites (``engine/ledger.py``, ``core/fate.py:decide``), every Lua
script (``complete.lua``), every dotted public name (``cogworker.api``) and every
``Name.attribute`` call it walks through (``Config.redis()``, ``api.limiters()``) is
looked up in the tree, so the design can't drift from the code unnoticed: a rename that
forgets the doc fails here.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cogworker"
# docs/architecture.md is the Internals section's index; the design itself is in its pages.
DOCS = [ROOT / "docs" / "architecture.md", *sorted((ROOT / "docs" / "internals").glob("*.md"))]
# Names of the standard library and of libraries the doc mentions in passing: not ours to check.
EXTERNAL = {"os", "sys", "signal", "time", "json", "redis", "asyncio", "threading", "subprocess", "socket", "gc"}

PATH_RE = re.compile(r"`((?:[a-z_0-9]+/)*[a-z_0-9]+\.py)(?::([A-Za-z_][A-Za-z_0-9.]*))?`")
LUA_RE = re.compile(r"`([a-z_0-9]+\.lua)`")
DOTTED_RE = re.compile(r"`(cogworker(?:\.[A-Za-z_][A-Za-z_0-9]*)+)(?:\(\))?`")
CALL_RE = re.compile(r"`([A-Za-z_][A-Za-z_0-9]*)\.([A-Za-z_][A-Za-z_0-9]*)\(\)`")


def _text() -> str:
    return "\n".join(doc.read_text() for doc in DOCS)


def _resolve_path(cited: str) -> Path | None:
    for base in (PACKAGE, ROOT, ROOT / "tests", ROOT / "bench", ROOT / "docs"):
        if (base / cited).is_file():
            return base / cited
    if "/" not in cited:  # a bare file name, in a paragraph about its package: any module of that name
        found = sorted(PACKAGE.rglob(cited))
        if found:
            return found[0]
        package = PACKAGE / cited.removesuffix(".py") / "__init__.py"
        if package.is_file():
            return package
    return None


def _names_of(tree: ast.AST) -> dict[str, set[str]]:
    """Each top-level name of a module, with the attributes a class defines (methods,
    annotated fields, ``self.x = ...`` in its methods, class-level assignments)."""
    found: dict[str, set[str]] = {}
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            found[node.name] = _class_attributes(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = set()
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            for alias in node.names:
                found[(alias.asname or alias.name).split(".")[0]] = set()
        elif isinstance(node, ast.If):  # try/except and TYPE_CHECKING blocks define names too
            found.update(_names_of(ast.Module(body=node.body + node.orelse, type_ignores=[])))
        elif isinstance(node, ast.Try):
            found.update(_names_of(ast.Module(body=node.body, type_ignores=[])))
    return found


def _class_attributes(node: ast.ClassDef) -> set[str]:
    attrs: set[str] = set()
    for item in ast.walk(node):
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            attrs.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            attrs.add(item.target.id)
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                if isinstance(target, ast.Name):
                    attrs.add(target.id)
                elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    attrs.add(target.attr)
    return attrs


@cache
def _index() -> tuple[dict[str, dict[str, set[str]]], dict[str, set[str]]]:
    """(module stem or package name -> its names, class name -> its attributes), over the package."""
    modules: dict[str, dict[str, set[str]]] = defaultdict(dict)
    classes: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        names = _names_of(ast.parse(path.read_text()))
        stem = path.parent.name if path.name == "__init__.py" else path.stem
        modules[stem].update(names)
        for name, attrs in names.items():
            if attrs or name[:1].isupper():
                classes[name] |= attrs
    return modules, classes


def _defined(path: Path, qualname: str) -> bool:
    names = _names_of(ast.parse(path.read_text()))
    head, _, rest = qualname.partition(".")
    if head not in names:
        return False
    return not rest or rest.split(".")[0] in names[head]


def test_every_cited_module_path_and_name_exists() -> None:
    missing = []
    for cited, qualname in sorted(set(PATH_RE.findall(_text()))):
        path = _resolve_path(cited)
        if path is None:
            missing.append(cited)
        elif qualname and not _defined(path, qualname):
            missing.append(f"{cited}:{qualname}")
    assert not missing, f"docs/architecture.md cites what the tree doesn't have: {missing}"


def test_every_cited_script_exists() -> None:
    scripts = {path.name for path in PACKAGE.rglob("*.lua")}
    missing = sorted(set(LUA_RE.findall(_text())) - scripts)
    assert not missing, f"docs/architecture.md cites scripts that don't exist: {missing}"


def test_every_dotted_public_name_imports() -> None:
    missing = []
    for dotted in sorted(set(DOTTED_RE.findall(_text()))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            try:
                spec = importlib.util.find_spec(module)
            except ImportError:
                spec = None
            if spec is None:
                continue
            if cut == len(parts):  # a module: it exists (importing some needs their framework set up)
                break
            try:
                obj: object = importlib.import_module(module)
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(dotted)
            break
        else:
            missing.append(dotted)
    assert not missing, f"docs/architecture.md names what doesn't import: {missing}"


def test_every_walked_call_exists() -> None:
    modules, classes = _index()
    missing = []
    for owner, attr in sorted(set(CALL_RE.findall(_text()))):
        if owner in EXTERNAL:
            continue
        if attr in modules.get(owner, {}) or attr in classes.get(owner, set()):
            continue
        missing.append(f"{owner}.{attr}()")
    assert not missing, f"docs/architecture.md walks through calls that don't exist: {missing}"


ANCHOR_RE = re.compile(r'<a id="([^"]+)"></a>')
CITED_RE = re.compile(r"architecture\.md#([a-z0-9-]+)")


def test_every_anchor_of_the_design_is_listed_in_its_index() -> None:
    """Code comments cite ``docs/architecture.md#<anchor>``: the index lists every anchor the
    Internals pages hold, each leading to its page, so a split or a move can't strand one."""
    index = (ROOT / "docs" / "architecture.md").read_text()
    listed = dict(re.findall(r'<a id="([^"]+)"></a>`#[^`]+` \| \[[^\]]+\]\((internals/[a-z-]+\.md)#', index))
    held = {
        anchor: f"internals/{page.name}"
        for page in (ROOT / "docs" / "internals").glob("*.md")
        for anchor in ANCHOR_RE.findall(page.read_text())
    }
    assert listed == held, f"the index and the pages disagree: {set(listed.items()) ^ set(held.items())}"


def test_every_cited_anchor_exists() -> None:
    index = set(ANCHOR_RE.findall((ROOT / "docs" / "architecture.md").read_text()))
    missing = set()
    for path in [
        *PACKAGE.rglob("*.py"),
        *PACKAGE.rglob("*.lua"),
        *(ROOT / "tests").glob("*.py"),
        *(ROOT / "bench").rglob("*.py"),
        ROOT / "pyproject.toml",
        *(ROOT / "docs").rglob("*.md"),
    ]:
        for anchor in CITED_RE.findall(path.read_text()):
            if anchor not in index:
                missing.add(f"{path.relative_to(ROOT)}: #{anchor}")
    assert not missing, f"citations of docs/architecture.md#<anchor> that lead nowhere: {sorted(missing)}"
