"""What the benches that measure cogworker's code, often two checkouts of it, share: the
bench's jobs written as a module into a temporary directory of their own (a checkout's
interpreter imports them from there, whatever its tree holds), a ``python -c`` child run in
a checkout's own ``.venv`` and source tree, and the OLD NEW command line."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


def app_dir(module: str, source: str) -> str:
    """A fresh temporary directory holding ``source`` as ``{module}.py``."""
    path = Path(tempfile.mkdtemp(prefix=f"cogbench-{module}-"))
    (path / f"{module}.py").write_text(source)
    return str(path)


def run_child(
    checkout: str,
    code: str,
    argv: Sequence[str],
    what: str,
    prefix: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> str:
    """``python -c code *argv`` with ``checkout``'s interpreter, in its tree (PYTHONPATH
    dropped, so its own cogworker is the one imported; ``env`` added); its stdout.
    ``prefix`` wraps it (valgrind); a failure is a RuntimeError naming ``what``."""
    python = str(Path(checkout, ".venv", "bin", "python"))
    child_env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(env or {})}
    done = subprocess.run(
        [*prefix, python, "-c", code, *argv], cwd=checkout, env=child_env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{checkout} {what} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def old_new_parser(
    prog: str, doc: str, jobs: int, reps_help: str | None = None, jobs_help: str | None = None
) -> argparse.ArgumentParser:
    """``OLD NEW [--reps N] [--jobs N]``: the two checkouts and how much of each to run."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--reps", type=int, default=5, help=reps_help)
    ap.add_argument("--jobs", type=int, default=jobs, help=jobs_help)
    return ap
