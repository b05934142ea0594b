"""The deploy recipes (deploy/) and the docs' commands (the README and the site's pages):
every flag they pass to cogworker-prefork or python -m cogworker.worker exists, each complete
command line parses, each platform waits longer than --timeout + 2 s between TERM and SIGKILL,
the Deploying page shows each recipe verbatim, and the docs document what a new user looks for."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cogworker.prefork.cli import build_parser
from cogworker.worker.runner import build_parser as build_runner_parser

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
README = (ROOT / "README.md").read_text()
DEPLOYING = (ROOT / "docs" / "operations" / "deploying.md").read_text()
INSTALLING = (ROOT / "docs" / "getting-started.md").read_text()
# Every page of the docs: the README and the site's.
DOCS = "\n".join([README, *(page.read_text() for page in sorted((ROOT / "docs").rglob("*.md")))])
RECIPES = ["Procfile", "cogworker.service", "Dockerfile", "kubernetes.yaml"]
MASTER_WORK = 2.0  # the master's own work after --timeout, before it exits


def prefork_flags() -> set[str]:
    return {opt for action in build_parser()._actions for opt in action.option_strings}


def runner_flags() -> set[str]:
    return {opt for action in build_runner_parser()._actions for opt in action.option_strings}


def cli_flags() -> set[str]:
    """Every option of the `cogworker` command and of each of its subcommands."""
    import argparse

    from cogworker.cli.parser import build_parser as build_cli_parser

    parser = build_cli_parser()
    found = {opt for action in parser._actions for opt in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= {opt for a in sub._actions for opt in a.option_strings}
    return found


def commands_in(text: str, program: str) -> list[list[str]]:
    """Every command line of ``program`` (a regex) in ``text``: shell lines, and JSON/YAML
    flow arrays (``["cogworker-prefork", "--timeout", "25", "app.jobs"]``)."""
    found = []
    for line in text.splitlines():
        match = re.search(program, line)
        if not match:
            continue
        array = re.search(r'\[\s*"(' + program + r')"(.*)\]', line)
        if array:
            found.append(json.loads("[" + array.group(2).lstrip(",") + "]"))
            continue
        rest = line[match.end() :].split("#", 1)[0]
        rest = rest.split("`", 1)[0]  # inline code in prose ends at the backquote
        try:
            found.append(shlex.split(rest))
        except ValueError:
            found.append(rest.split())
    return found


PREFORK = r"cogworker-prefork"
RUNNER = r"python -m cogworker\.worker|(?:^|`|\$ )cogworker worker(?= )"
CLI = r"(?:^|`|\$ )cogworker(?= )(?! worker)"


def flags(tokens: list[str]) -> list[str]:
    return [re.sub(r"[\[\]]|\.\.\.$", "", t) for t in tokens if re.match(r"\[?-", t)]


def test_every_recipe_command_parses_with_the_real_parser():
    for name in RECIPES:
        commands = commands_in((DEPLOY / name).read_text(), PREFORK)
        assert commands, f"{name} runs no cogworker-prefork"
        for tokens in commands:
            args = build_parser().parse_args(tokens)  # exits on an unknown flag or a bad value
            assert args.module == "app.jobs"


def test_every_flag_in_the_readme_and_recipes_exists():
    texts = [DOCS] + [(DEPLOY / name).read_text() for name in RECIPES]
    known = {PREFORK: prefork_flags(), RUNNER: runner_flags(), CLI: cli_flags()}
    assert {"--no-cron", "--version", "-q"} <= known[RUNNER]
    used = 0
    for program, options in known.items():
        for text in texts:
            for tokens in commands_in(text, program):
                for flag in flags(tokens):
                    used += 1
                    assert flag.split("=")[0] in options, f"{program} has no {flag} (docs/deploy)"
    assert used > 10


def _timeout(text: str) -> float:
    [command] = commands_in(text, PREFORK)
    return build_parser().parse_args(command).timeout


def test_each_platform_waits_longer_than_the_timeout_plus_the_masters_work():
    procfile = (DEPLOY / "Procfile").read_text()
    assert procfile.startswith("worker: cogworker-prefork ")
    assert _timeout(procfile) + MASTER_WORK <= 30  # Heroku: SIGKILL 30 s after TERM

    unit = (DEPLOY / "cogworker.service").read_text()
    settings = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    assert settings["KillMode"] == "mixed" and settings["Restart"] == "on-failure"
    assert float(settings["TimeoutStopSec"]) > _timeout(unit) + MASTER_WORK

    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^STOPSIGNAL SIGTERM$", dockerfile, re.M)
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--"\]$', dockerfile, re.M)
    assert "tini" in re.search(r"^RUN apt-get.*?$\n(.*\n)*?.*lists", dockerfile, re.M).group(0)
    stop = re.search(r"docker run --stop-timeout (\d+)", DEPLOYING)
    assert stop and float(stop.group(1)) > _timeout(dockerfile) + MASTER_WORK

    manifest = (DEPLOY / "kubernetes.yaml").read_text()
    grace = float(re.search(r"terminationGracePeriodSeconds: (\d+)", manifest).group(1))
    assert grace > _timeout(manifest) + MASTER_WORK
    assert "lifecycle:" not in manifest  # no preStop hook: TERM itself stops fetching


def test_the_deploying_page_shows_each_recipe_verbatim():
    for name in RECIPES:
        assert (DEPLOY / name).read_text().rstrip("\n") in DEPLOYING, f"the Deploying page's deploy/{name} is stale"
    assert DEPLOYING.startswith("# Deploying")


def test_the_systemd_unit_verifies():
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (deploy/lint.sh runs it where it is)")
    prefork = Path(sys.executable).parent / "cogworker-prefork"
    unit = (DEPLOY / "cogworker.service").read_text().replace("/srv/app/.venv/bin/cogworker-prefork", str(prefork))
    assert str(prefork) in unit
    with_path = Path(__file__).parent / f".verify-{id(unit)}" / "cogworker.service"
    with_path.parent.mkdir()
    try:
        with_path.write_text(unit)
        result = subprocess.run([analyze, "verify", str(with_path)], capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(with_path.parent)
    # verify exits 0 on an unknown setting too, with a warning: any output is a failure.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


# -- the docs document what a new user looks for -----------------------------------------------


def test_the_layout_lists_every_module():
    layout = (ROOT / "docs" / "internals" / "layout.md").read_text()
    for path in sorted((ROOT / "cogworker").rglob("*.py")):
        if path.name == "__init__.py" and path.parent.name != "cogworker":
            continue
        assert path.name in layout, f"docs/internals/layout.md omits {path.relative_to(ROOT)}"


def test_the_docs_document_the_commands_and_calls():
    for text in (
        "`cogworker` command",
        "--no-cron",
        "cogworker.enqueue_at(",
        "cogworker.by_name(",
        "--version",
        "seconds first",
    ):
        assert text in DOCS, text
    assert "the last** one is seconds" not in DOCS


def test_license_is_mit_as_pyproject_says():
    license_text = (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the cogworker developers" in license_text
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def test_the_docs_install_from_a_checkout_or_a_wheel_never_from_an_index():
    """cogworker is on no public index: `pip install 'cogworker[web]'` finds nothing."""
    assert not re.search(r"pip install '?cogworker\[", DOCS)
    assert "pip install '/path/to/cogworker[web,metrics]'" in INSTALLING
    assert "pip wheel --no-deps -w dist /path/to/cogworker" in INSTALLING
    version = re.search(r'^__version__ = "([^"]+)"', (ROOT / "cogworker" / "version.py").read_text(), re.M).group(1)
    assert f"pip install 'dist/cogworker-{version}-py3-none-any.whl[web]'" in INSTALLING
    assert "A job's return value is discarded" in DOCS


def test_the_wheel_the_readme_builds_installs_a_working_package(tmp_path):
    """The Getting started page's wheel, built from this checkout and installed on its own: the package,
    its scripts and templates (package data), and its console scripts."""
    import zipfile

    version = re.search(r'^__version__ = "([^"]+)"', (ROOT / "cogworker" / "version.py").read_text(), re.M).group(1)
    assert f"cogworker-{version}-py3-none-any.whl" in INSTALLING  # the name the page shows is the one built
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = tmp_path / "dist" / f"cogworker-{version}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert "cogworker/transitions/fetch.lua" in names and "cogworker/web/templates/dashboard.html" in names
    entry_points = zipfile.ZipFile(wheel).read(f"cogworker-{version}.dist-info/entry_points.txt").decode()
    assert "cogworker-prefork = cogworker.prefork.cli:main" in entry_points
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    code = (
        "import cogworker, cogworker.store.lua as lua; print(cogworker.__file__); assert 'KEYS' in lua.source('fetch')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(str(tmp_path / "site")), out.stdout
