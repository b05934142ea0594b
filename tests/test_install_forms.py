"""The Getting started page's three ways to list cogworker in a ``requirements.txt`` (a private index, a
``git+`` URL, a vendored wheel), each run through pip itself (``pip install --dry-run
--report``) against a wheel and a git repository made from this tree: what pip would
install is this version of cogworker, from where the line says, with the ``web`` extra."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cogworker

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "docs" / "getting-started.md").read_text()  # where installing is documented
VERSION = cogworker.__version__


def form(number: int) -> list[str]:
    """The lines of the page's requirements block ``# N.`` (comments left out)."""
    found = re.search(rf"```\n# {number}\. [^\n]*\n(.*?)```", README, re.S)
    assert found, f"the Getting started page's requirements.txt form {number}"
    return [line for line in found.group(1).splitlines() if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This tree as a git repository tagged v<version>, and the wheel built from it."""
    where = tmp_path_factory.mktemp("install")
    tree = where / "repo"
    ignore = shutil.ignore_patterns(".git", ".venv", "bench", "dist", "build", "*.egg-info", "__pycache__", ".*_cache")
    shutil.copytree(ROOT, tree, ignore=ignore)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-C", str(tree)]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "tree"], ["tag", f"v{VERSION}"]):
        subprocess.run([*git, *step], check=True, capture_output=True, timeout=120)
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(where / "dist"), str(tree)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (where / "dist").glob("*.whl")
    return tree, wheel


def pip_report(app: Path, lines: list[str], env: dict[str, str], isolated: bool = True) -> dict:
    """What ``pip install -r requirements.txt`` would install, run from ``app`` (as a
    buildpack runs it from the app's root). ``isolated``: none of this machine's indexes."""
    (app / "requirements.txt").write_text("\n".join(lines) + "\n")
    full = {**os.environ, **env}
    args = ["--dry-run", "--no-deps", "--ignore-installed", "--quiet", "--report", str(app / "report.json")]
    if isolated:
        full["PIP_CONFIG_FILE"] = os.devnull
        for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL", "PIP_CONSTRAINT"):
            full.pop(name, None)
        (app / "empty").mkdir(exist_ok=True)
        args += ["--index-url", (app / "empty").as_uri()]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", *args, "-r", "requirements.txt"],
        cwd=app,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (item,) = json.loads((app / "report.json").read_text())["install"]
    assert item["metadata"]["name"] == "cogworker" and item["metadata"]["version"] == VERSION
    assert item["requested_extras"] == ["web"]
    return item


def test_a_private_index(built, tmp_path):
    _, wheel = built
    project = tmp_path / "simple" / "cogworker"  # a PEP 503 index: a page per project
    project.mkdir(parents=True)
    shutil.copy(wheel, project / wheel.name)
    (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    (tmp_path / "app").mkdir()
    lines = form(1)
    assert any("${PRIVATE_INDEX_URL}" in line for line in lines)  # the token stays in the environment
    item = pip_report(tmp_path / "app", lines, {"PRIVATE_INDEX_URL": (tmp_path / "simple").as_uri() + "/"})
    assert item["download_info"]["url"] == (project / wheel.name).as_uri()


def test_a_git_url(built, tmp_path):
    tree, _ = built
    (line,) = form(2)
    assert line.startswith("cogworker[web] @ git+https://") and line.endswith(f"@v{VERSION}")
    # This tree's repository, the same tag (a host in the URL: a PEP 508 URL needs one)
    local = re.sub(r"git\+https://\S+?@v", f"git+file://localhost{tree}@v", line)
    (tmp_path / "app").mkdir()
    # Not isolated: building from source fetches the build backend (setuptools) from an index.
    item = pip_report(tmp_path / "app", [local], {}, isolated=False)
    assert item["download_info"]["url"] == f"file://localhost{tree}"
    assert item["download_info"]["vcs_info"]["requested_revision"] == f"v{VERSION}"


def test_a_vendored_wheel(built, tmp_path):
    _, wheel = built
    app = tmp_path / "app"
    (app / "vendor").mkdir(parents=True)
    shutil.copy(wheel, app / "vendor" / wheel.name)
    (line,) = form(3)
    assert line == f"./vendor/{wheel.name}[web]", (line, wheel.name)
    item = pip_report(app, [line], {})
    assert item["download_info"]["url"] == (app / "vendor" / wheel.name).as_uri()
