"""The tree's shape (docs/architecture.md#layers): one seam for Redis, no import cycle
(imports inside functions and under TYPE_CHECKING count), every module in a contract,
and the public paths the docs show. import-linter checks the layering itself."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cogworker"


def _layers_script():
    """docs/layers.py (a script, not a package) reads the imports the same way: one reader for both."""
    spec = importlib.util.spec_from_file_location("docs_layers", ROOT / "docs" / "layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LAYERS = _layers_script()
modules, imported = _LAYERS.modules, _LAYERS.imported


def test_only_the_store_imports_redis_py():
    known = modules()
    outside = sorted(
        name
        for name, path in known.items()
        if not name.startswith("cogworker.store")
        and any(m == "redis" or m.startswith("redis.") for m in imported(name, path, known))
    )
    assert outside == []


def test_no_import_cycle_between_modules():
    known = modules()
    graph = {
        name: {m for m in imported(name, path, known) if m in known and m != name and m != "cogworker"}
        for name, path in known.items()
    }

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            for nxt in graph[here]:
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def within(a: str, b: str) -> bool:  # a package's __init__ and its own submodules
        return a.startswith(b + ".") or b.startswith(a + ".")

    cycles = sorted((a, b) for a in graph for b in graph[a] if not within(a, b) and reaches(b, a))
    assert cycles == []


def test_every_module_is_in_an_import_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    named: set[str] = set()
    containers: set[str] = set()
    for contract in contracts:
        for container in contract.get("containers", []):
            containers.add(container)
            for line in contract["layers"]:
                named.update(f"{container}.{part.strip()}" for part in line.replace(":", "|").split("|"))
        named.update(contract.get("modules", []))

    # a module is named on a line of its package's contract (a package with modules of its
    # own is a container of one), not merely covered by its package's name
    assert sorted(name for name in modules() if name not in named | containers) == []


@pytest.mark.parametrize(
    "path",
    [
        "cogworker.job",
        "cogworker.api.status",
        "cogworker.hooks.subscribe",
        "cogworker.stats.attempts",
        "cogworker.cron.disabled",
        "cogworker.cron.schedule",
        "cogworker.web.create_app",
        "cogworker.errors.NotFound",
        "cogworker.configure",
        "cogworker.periodic",
        "cogworker.client_middleware",
        "cogworker.by_name",
    ],
)
def test_the_readmes_paths_resolve(path):
    import cogworker

    value = cogworker
    for part in path.split(".")[1:]:
        value = getattr(value, part)
    assert value is not None


def test_public_modules_import_by_path():
    for name in (
        "cogworker.api",
        "cogworker.web",
        "cogworker.errors",
        "cogworker.config",
        "cogworker.cron",
        "cogworker.worker",
        "cogworker.prefork.cli",
        "cogworker.cli",
    ):
        importlib.import_module(name)


def test_python_m_cogworker_worker_is_the_single_process_worker():
    out = subprocess.run(
        [sys.executable, "-m", "cogworker.worker", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.startswith("usage: python -m cogworker.worker")


@pytest.mark.parametrize(
    "module, name",
    [("cogworker.stats", "attempts"), ("cogworker.hooks", "subscribe"), ("cogworker.hooks", "JobEvent")],
)
def test_a_public_path_imports_either_way(module, name):
    """``from cogworker.stats import attempts`` is what ``cogworker.stats.attempts`` is."""
    import importlib

    import cogworker

    imported = getattr(importlib.import_module(module), name)
    attribute = getattr(getattr(cogworker, module.split(".")[1]), name)
    assert imported is attribute
