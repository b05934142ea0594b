"""The documentation site and the README: no internal history in them (the CHANGELOG keeps
it), and the reference pages generated from the code list all of it.

``mkdocs build --strict`` (in .ci/run) checks the links, the anchors and that every page is
in the nav; docs/test_docs_examples.py runs the examples."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# How a page would point at the project's own history rather than at what the software does.
HISTORY = [
    (re.compile(r"\bissues? #?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"(?<![\w&/{])#\d+\b"), "an issue number"),
    (re.compile(r"\b(?:commits? [0-9a-f]{7,40}|main at [0-9a-f]{7,40}|against main)\b", re.IGNORECASE), "a commit"),
    (re.compile(r"(?<![\w-])(?=[0-9a-f]{7}\b)(?=[a-f]*\d)(?=\d*[a-f])[0-9a-f]{7}\b"), "a commit hash"),
    (re.compile(r"\b(?:this|earlier|previous|later|same|of the|in one) sessions?\b(?! cookie)", re.I), "a session"),
    (re.compile(r"\bthis (?:branch|PR|pull request)\b", re.IGNORECASE), "a branch"),
]


def history_in(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, what in HISTORY:
            for match in pattern.finditer(line):
                found.append(f"{number}: {what}: {match.group(0)!r}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_internal_history(page: Path) -> None:
    found = history_in(page.read_text())
    assert not found, f"{page.relative_to(ROOT)} tells the project's history (the CHANGELOG's job):\n" + "\n".join(
        found
    )


def test_the_history_check_finds_what_it_looks_for() -> None:
    text = "fixed in issue 30 (#26), commit 7ad25b2, measured in this session, main at d66a6aa"
    assert len(history_in(text)) >= 5
    assert not history_in("a jid d6e49423fa, 32 jobs, §12, the session cookie, `#queues`, 1234567")


# -- the generated reference -------------------------------------------------------------------


def refgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cogworker_docs_refgen", ROOT / "docs" / "refgen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_page_lists_every_setting_and_variable() -> None:
    from cogworker.config import Config

    page = refgen().settings_page()
    for field in dataclasses.fields(Config):
        if field.init:
            assert f"| `{field.name}` |" in page, field.name
    for name in ("COGWORKER_REDIS_URL", "REDIS_URL", "COGWORKER_IMPORT_PREFIXES", "COGWORKER_WAIT_REPLICAS"):
        assert f"`{name}`" in page
    # the variables a setting's default is read from
    assert re.search(r"\| `redis_url` \|.*`COGWORKER_REDIS_URL`, `REDIS_URL`", page)
    assert re.search(r"\| `cluster_layout` \|.*`COGWORKER_CLUSTER_LAYOUT`", page)


def test_every_variable_the_docs_name_is_read_by_the_code() -> None:
    read = set(refgen().environment())
    named = {name for page in PAGES for name in re.findall(r"\bCOGWORKER_[A-Z_]*[A-Z]\b", page.read_text())}
    assert named - read == set(), f"the docs name variables nothing reads: {sorted(named - read)}"


def test_the_keys_page_lists_every_key() -> None:
    from cogworker.keys import Keys

    page = refgen().keys_page()
    for attr, value in vars(Keys("cogworker")).items():
        if isinstance(value, str) and attr != "namespace":
            assert f"| `{attr}` | `{value}" in page, attr


def test_the_cli_page_lists_every_command_and_option() -> None:
    from cogworker.prefork.cli import build_parser

    page = refgen().cli_page()
    for command in ("stats", "queues", "queue", "jobs", "retry", "delete", "processes", "periodic", "web", "health"):
        assert f"## `cogworker {command}`" in page, command
    for action in build_parser()._actions:
        for option in action.option_strings:
            assert option in page, option


def test_the_api_page_documents_every_public_name() -> None:
    import cogworker

    page = refgen().api_page()
    for name in cogworker.__all__:
        assert f'heading: "cogworker.{name}"' in page, name


def test_the_job_life_diagram_draws_every_hook_event_and_is_current() -> None:
    from cogworker.core.hooks import EVENTS

    spec = importlib.util.spec_from_file_location("cogworker_docs_job_life", ROOT / "docs" / "job_life.py")
    assert spec and spec.loader
    job_life = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job_life)
    assert set(EVENTS) <= job_life.events_drawn(), f"not drawn: {set(EVENTS) - job_life.events_drawn()}"
    drawn = (ROOT / "docs" / "job-life.dot").read_text()
    assert drawn == job_life.dot(), "docs/job-life.png is stale: run python3 docs/job_life.py"


def test_the_readmes_links_lead_somewhere() -> None:
    """The README links into the site's pages (GitHub shows them too): each target exists,
    and the README stays a front page, not a manual (at most 250 lines)."""
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not t.startswith(("http://", "https://", "mailto:"))]
    assert len(local) > 20, "the README links into the site"
    missing = sorted({t for t in local if not (ROOT / t).exists()})
    assert not missing, f"the README links to what isn't there: {missing}"
    assert len(readme.splitlines()) <= 250


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    """What `mkdocs build --strict` (in .ci/run) refuses, checked here too, without MkDocs."""
    nav = re.findall(r"^\s*- (?:[^:\n]+: )?([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    generated = set(refgen().PAGES)
    written = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert len(nav) == len(set(nav)), "a page twice in the nav"
    assert set(nav) - written - generated == set(), "nav entries with no page"
    assert written - set(nav) == set(), "pages outside the nav"
    assert generated <= set(nav)
