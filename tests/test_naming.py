"""Names that mean one thing (the issue "One home for the job's state machine", point 6;
tests/test_names.py is about queue and job names).

- No two public classes of cogworker share a name: a reader (or a traceback, or a type
  in an editor's hover) that says ``Window`` or ``ProcessRecord`` names one class. Every
  module is read as source (no import: optional extras such as Django or the web server
  need not be installed), and every class a module defines at its top level (inside a
  module-level ``if``/``try`` too) counts; a name starting with ``_`` is private.
- "Batch" names batches with callbacks only (``cogworker.batch``): the look-ahead's K
  jobs per round trip are a look-ahead of K (``fetch_ahead.lua``, ``engine/fetch/ahead.py``,
  docs/architecture.md#lookahead-k), so a file named for a batch is one of the callback
  batch's own.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cogworker"

# The callback batch's modules, scripts and templates (docs/architecture.md#batches). A new
# file named for a batch belongs here only if it is about batches with callbacks.
CALLBACK_BATCH_FILES = {
    "api/batch_member.py",
    "api/batches.py",
    "cli/batches.py",
    "client/batches.py",
    "core/batchscope.py",
    "transitions/_batch.lua",
    "transitions/batch_close.lua",
    "transitions/batch_open.lua",
    "transitions/batch_push.lua",
    "transitions/batches.py",
    "web/batches.py",
    "web/templates/_batch.html",
    "web/templates/batch.html",
    "web/templates/batches.html",
}


def _module_classes(tree: ast.Module) -> list[str]:
    """The classes a module defines at its top level, module-level blocks included (not
    classes inside a function or another class: those are no module attribute)."""
    found: list[str] = []
    blocks: list[list[ast.stmt]] = [tree.body]
    while blocks:
        for node in blocks.pop():
            if isinstance(node, ast.ClassDef):
                found.append(node.name)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                blocks.append(node.body)
                blocks.append(getattr(node, "orelse", []))
                blocks.append(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    blocks.append(handler.body)
    return found


def public_classes() -> dict[str, list[str]]:
    """Public class name -> the modules (paths under cogworker/) that define one."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _module_classes(ast.parse(path.read_text(), str(path))):
            if not name.startswith("_"):
                where[name].append(str(path.relative_to(PACKAGE)))
    return where


def test_the_walk_sees_the_public_classes() -> None:
    # The walk itself: it finds classes in plain modules and in packages' __init__.py,
    # and leaves private ones out (a walk that found nothing would pass the test below).
    where = public_classes()
    assert where["Window"] == ["core/limits.py"]  # cogworker.Window, the public limiter
    assert "ProcessRecord" in where and "Config" in where
    assert not [name for name in where if name.startswith("_")]
    assert len(where) > 200


def test_no_two_public_classes_share_a_name() -> None:
    shared = {name: paths for name, paths in public_classes().items() if len(paths) > 1}
    assert not shared, "public classes sharing a name (rename all but one): " + "; ".join(
        f"{name} in {', '.join(paths)}" for name, paths in sorted(shared.items())
    )


def test_a_file_named_for_a_batch_is_the_callback_batchs() -> None:
    named = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*") if p.is_file() and "batch" in p.name.lower()}
    named = {p for p in named if "__pycache__" not in p}
    assert named == CALLBACK_BATCH_FILES, (
        f"named for a batch but not the callback batch's: {sorted(named - CALLBACK_BATCH_FILES)}; "
        f"gone: {sorted(CALLBACK_BATCH_FILES - named)}"
    )


def test_the_design_has_no_batch_anchor_but_the_callback_batchs() -> None:
    # The look-ahead's sections are #lookahead-k and #lookahead-multi; #batches is the
    # callback batch's.
    index = (ROOT / "docs" / "architecture.md").read_text()
    anchors = {part.split('"', 1)[0] for part in index.split('<a id="')[1:]}
    assert {a for a in anchors if "batch" in a} == {"batches"}
    assert {"lookahead-k", "lookahead-multi"} <= anchors


# Where shards may be named (docs/architecture.md#cluster-layout): the seam the client and
# the faces ask (routing.py), what it stands on (config.py makes and caches each shard's
# config, layout.py names them, keys.py the registry's key), the prefork master's
# assignment of children to shards (prefork/), the public field api.JobRecord.shard (the
# part an entry was read in) and the test cluster's reshard. Every other module asks
# routing "which part holds this queue or job" and "every part".
SHARD_HOMES = {
    "api/queues.py",
    "api/records.py",
    "api/sets.py",
    "config.py",
    "keys.py",
    "layout.py",
    "prefork/children.py",
    "prefork/master.py",
    "prefork/shards.py",
    "prefork/siblings.py",
    "prefork/slots.py",
    "routing.py",
    "testing/cluster.py",
}


def test_only_the_routing_seam_and_its_homes_name_shards() -> None:
    naming = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix in (".py", ".lua", ".html") and "shard" in p.read_text().lower()
    }
    assert naming <= SHARD_HOMES, f"ask cogworker.routing instead of naming shards in: {sorted(naming - SHARD_HOMES)}"
