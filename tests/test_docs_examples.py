"""Every example in the README and the documentation site runs.

- Every ```python block is executed, each page's blocks in order as one program (they build
  on each other), against a private Redis, with a real single-process worker running the
  jobs the page defines. The worker loads the page's definitions (its imports, functions
  and classes: what an app module holds); the page's own program then enqueues and waits
  as the reader would. The documented default URL (``redis://localhost:6379/0``) is
  replaced by the private server's, so no example touches a Redis this test didn't start.
- A block that can't run here says so right above it, visibly, with the reason:
  ``<!-- not run: needs a Django project -->`` (the site shows it as a note: docs/hooks.py).
- Every line of a shell block that runs ``cogworker`` or ``cogworker-prefork`` is parsed by
  that command's own argparse parser (nothing is executed) and must parse.

The count of blocks run and marked is printed (``-s``) and checked: no page can quietly
mark everything.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from cogworker.cli.parser import build_parser as cli_parser
from cogworker.cli.parser import check as cli_check
from cogworker.prefork.cli import build_parser as prefork_parser
from cogworker.worker.runner import build_parser as worker_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE_RE = re.compile(r"^(\s*)```(\w*)\s*$")
NOT_RUN_RE = re.compile(r"<!-- not run: (.+?) -->")
DEFAULT_URL = "redis://localhost:6379/0"
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the reason it is not run, if it is marked."""
    found, lines = [], page.read_text().splitlines()
    index = 0
    while index < len(lines):
        match = FENCE_RE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, lang, start = match.group(1), match.group(2), index
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        body = textwrap.dedent(
            "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[start + 1 : end])
        )
        above = [line for line in lines[max(0, start - 3) : start] if line.strip()]
        marked = NOT_RUN_RE.search(above[-1]) if above else None
        found.append(Block(page, start + 1, lang, body, marked.group(1) if marked else None))
        index = end + 1
    return found


def python_pages() -> list[Path]:
    return [page for page in PAGES if any(b.lang == "python" and not b.not_run for b in blocks(page))]


def module_name(page: Path) -> str:
    return "docs_example_" + re.sub(r"\W", "_", str(page.relative_to(ROOT).with_suffix("")))


def app_module(program: str) -> str:
    """What an app module of the page holds: its imports, functions and classes (the jobs),
    and its configuration call; none of its enqueues or waits."""
    tree = ast.parse(program)
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kept.append(node)
        elif isinstance(node, ast.Expr) and "configure(" in ast.unparse(node):
            kept.append(node)
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


HARNESS = """
import ast, asyncio, os, signal, subprocess, sys, types
sys.path.insert(0, os.environ["DOCS_EXAMPLE_DIR"])
name, program_path = sys.argv[1], sys.argv[2]
worker = subprocess.Popen([sys.executable, "-m", "cogworker.worker", name + "_app"], env=os.environ)
try:
    module = types.ModuleType(name + "_app")  # the program runs as the app module: the same job names
    sys.modules[module.__name__] = module
    code = compile(open(program_path).read(), program_path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, module.__dict__)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
finally:
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", python_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, redis_server, tmp_path: Path) -> None:
    redis_server.client().flushall()  # the session's private server, never another
    program = "\n\n".join(b.code for b in blocks(page) if b.lang == "python" and not b.not_run)
    program = program.replace(DEFAULT_URL, redis_server.url)
    name = module_name(page)
    (tmp_path / f"{name}_app.py").write_text(app_module(program))
    (tmp_path / f"{name}.py").write_text(program)
    (tmp_path / "harness.py").write_text(HARNESS)
    env = {
        **os.environ,
        "DOCS_EXAMPLE_DIR": str(tmp_path),
        "COGWORKER_REDIS_URL": redis_server.url,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "harness.py"), name, str(tmp_path / f"{name}.py")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.returncode == 0, f"{page.relative_to(ROOT)}'s examples failed:\n{done.stdout}\n{done.stderr[-4000:]}"


# -- shell blocks: every cogworker command line parses ------------------------------------------


def command_lines(code: str) -> list[str]:
    """The lines of a shell block that run cogworker or cogworker-prefork (continuations joined,
    a prompt and leading VAR=value assignments dropped)."""
    joined = code.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        line = line.strip().removeprefix("$ ")
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words.pop(0)
        if words and words[0].rsplit("/", 1)[-1] in ("cogworker", "cogworker-prefork"):
            found.append(shlex.join([words[0].rsplit("/", 1)[-1], *words[1:]]))
    return found


def parser_for(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser that reads ``words`` (a command line), and the words it reads."""
    if words[0] == "cogworker-prefork":
        return prefork_parser(), words[1:]
    if words[1:2] == ["worker"]:
        return worker_parser("cogworker worker"), words[2:]
    top = cli_parser()
    subparsers = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    if len(words) > 1 and words[1] in subparsers.choices:
        return subparsers.choices[words[1]], words[2:]
    return top, words[1:]


def check_synopsis(line: str) -> None:
    """A usage synopsis (``cogworker queue NAME [--limit N]``): its command exists and every
    option it names is one of that command's."""
    words = shlex.split(line.replace("|", " | "))
    parser, rest = parser_for(words)
    if (
        words[0] == "cogworker"
        and parser.prog == "cogworker"
        and len(words) > 1
        and not words[1].startswith(("-", "["))
    ):
        raise AssertionError(f"no such command: {line}")
    known = {option for action in parser._actions for option in action.option_strings}
    named = {re.sub(r"[\[\]]|\.\.\.$|=.*", "", word) for word in rest if word.lstrip("[").startswith("-")}
    unknown = sorted(named - known)
    if unknown:
        raise AssertionError(f"names options its command doesn't have ({', '.join(unknown)}): {line}")


def is_synopsis(line: str) -> bool:
    return bool(re.search(r"\[-|\[[A-Z]| \| |\w\|\w|\.\.\.", line))


def parse_command(line: str) -> None:
    """Parse one command line with its own parser: SystemExit(0) (--help, --version) is fine."""
    if is_synopsis(line):
        check_synopsis(line)
        return
    words = shlex.split(line)
    try:
        if words[0] == "cogworker-prefork":
            prefork_parser().parse_args(words[1:])
        elif words[1:2] == ["worker"]:
            worker_parser("cogworker worker").parse_args(words[2:])
        else:
            parser = cli_parser()
            cli_check(parser, parser.parse_args(words[1:]))
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise AssertionError(f"does not parse: {line}") from None


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def test_every_shell_command_parses(capsys: pytest.CaptureFixture[str]) -> None:
    failures, checked = [], 0
    for block in all_blocks():
        if block.lang not in SHELL_LANGS or block.not_run:
            continue
        for line in command_lines(block.code):
            checked += 1
            try:
                parse_command(line)
            except AssertionError as exc:
                failures.append(f"{block.where()}: {exc}")
    capsys.readouterr()  # the parsers' own one-line errors
    with capsys.disabled():
        print(f"\ncogworker command lines parsed: {checked}")
    assert checked > 20, f"only {checked} command lines found: the extraction is broken"
    assert not failures, "\n".join(failures)


def test_command_line_checks_can_fail() -> None:
    with pytest.raises(AssertionError):
        parse_command("cogworker-prefork --procs 0 app.jobs")
    with pytest.raises(AssertionError):
        parse_command("cogworker retry --no-such-flag")
    with pytest.raises(AssertionError):
        parse_command("cogworker queue NAME [--limit N] [--no-such-flag]")
    parse_command("cogworker queue NAME [--limit N]")
    assert command_lines("$ FOO=1 .venv/bin/cogworker stats \\\n  --json  # a comment") == ["cogworker stats --json"]


def test_the_count_of_blocks_run_and_marked() -> None:
    """Each marked block gives a reason; most blocks run. Printed with -s."""
    python = [b for b in all_blocks() if b.lang == "python"]
    marked = [b for b in python if b.not_run]
    for block in marked:
        assert len(block.not_run or "") > 10, f"{block.where()}: say why it isn't run"
    print(f"\npython blocks: {len(python) - len(marked)} run, {len(marked)} marked not run")
    for block in marked:
        print(f"  not run: {block.where()}: {block.not_run}")
    assert len(python) - len(marked) > 2 * len(marked), "most examples must run"


def test_app_module_keeps_definitions_only() -> None:
    program = "import cogworker\n@cogworker.job\ndef add(x, y):\n    return x + y\n\njid = add.enqueue(1, 2)\n"
    assert "enqueue" not in app_module(program) and "def add" in app_module(program)
