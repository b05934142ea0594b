"""`.ci/run` runs exactly the README's test command, so what CI passes is what a new user
runs from a fresh clone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n(python3 -m venv \.venv && [^\n]*pytest[^\n]*)\n```", readme)
    assert len(blocks) == 1, blocks
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert blocks[0] in lines
