"""The wheel: what `python -m build` makes carries the package data, py.typed, both console
scripts and the one version (cogworker/version.py). .ci/wheel-smoke goes further (a fresh
venv with the wheel installed runs a job); this checks the wheel itself, and that the
smoke check's file test catches a missing file."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import cogworker

ROOT = Path(__file__).resolve().parent.parent


def smoke_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wheel_smoke", ROOT / ".ci" / "wheel_smoke.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_version_has_one_source() -> None:
    from importlib import metadata

    assert cogworker.__version__ == smoke_module().expected_version(ROOT) == metadata.version("cogworker")
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "cogworker.version.__version__"' in pyproject
    assert "\nversion =" not in pyproject.split("[tool.setuptools.dynamic]")[0]


def test_the_built_wheel_has_every_data_file_and_both_scripts(tmp_path: Path) -> None:
    # Built from a copy: a build in the tree writes cogworker.egg-info there, which then
    # shadows the editable install's metadata for anything run from the project root.
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT,
        tree,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "bench",
            "dist",
            "build",
            "*.egg-info",
            "__pycache__",
            ".*_cache",
            ".master-*.log",  # a running test's master log, which may vanish mid-copy
        ),
    )
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(tree)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith(f"cogworker-{cogworker.__version__}-")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "unpacked")
        names = archive.namelist()
    smoke = smoke_module()
    assert smoke.check_files(ROOT, tmp_path / "unpacked" / "cogworker") == []
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = (tmp_path / "unpacked" / entry_points).read_text()
    assert "cogworker = cogworker.cli:main" in text and "cogworker-prefork = cogworker.prefork.cli:main" in text
    assert "[pytest11]\ncogworker = cogworker.pytest_plugin" in text  # the plugin, wherever the wheel goes
    assert not any(n.startswith(("tests/", "examples/", "bench/")) for n in names)


def test_the_file_check_names_a_missing_file(tmp_path: Path) -> None:
    copy = tmp_path / "cogworker"
    shutil.copytree(ROOT / "cogworker", copy)
    (copy / "web" / "static" / "app.js").unlink()
    (copy / "py.typed").unlink()
    assert smoke_module().check_files(ROOT, copy) == [
        "the wheel lacks cogworker/web/static/app.js",
        "the wheel lacks cogworker/py.typed",
    ]
