"""MkDocs hooks (mkdocs.yml: ``hooks``): the reference pages generated from the code
(docs/refgen.py) join the site as pages at build time, so no copy of them can go stale."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
# tests/test_docs_examples.py runs every Python block but those marked so, with the reason.
NOT_RUN = re.compile(r"^( *)<!-- not run: (.+?) -->$", re.MULTILINE)


def _refgen() -> Any:
    sys.path.insert(0, str(DOCS.parent))  # the checkout's cogworker, as the generators read it
    spec = importlib.util.spec_from_file_location("cogworker_docs_refgen", DOCS / "refgen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_files(files: Files, config: Any) -> Files:
    for uri, page in _refgen().PAGES.items():
        files.append(File.generated(config, uri, content=page()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A block the tests don't run says so on the page, visibly, with the reason."""

    def note(match: re.Match[str]) -> str:
        indent, reason = match.groups()
        return f'{indent}!!! note "Not run by the tests"\n{indent}    {reason}\n'

    return NOT_RUN.sub(note, markdown)
